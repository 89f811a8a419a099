"""Sampling decisions: perfect tiles and categorical choices, recorded and checked on replay."""

import random

import pytest

import tilegraph as tg
from tilegraph.schedule.sampling import check_perfect_tile, divisors, sample_categorical, sample_perfect_tile


def test_divisors():
    assert divisors(12) == [1, 2, 3, 4, 6, 12] and divisors(1) == [1]


@pytest.mark.parametrize("extent, n, max_inner", [(48, 3, None), (97, 2, 8), (64, 4, 4), (7, 1, None)])
def test_perfect_tiles_multiply_to_the_extent(extent, n, max_inner):
    rng = random.Random(0)
    for _ in range(20):
        tile = sample_perfect_tile(rng, extent, n, max_inner)
        assert len(tile) == n and all(t >= 1 for t in tile)
        product = 1
        for t in tile:
            product *= t
        assert product == extent
        if max_inner is not None and n > 1:
            assert tile[-1] <= max_inner
        assert check_perfect_tile(tile, extent, n) == tile


@pytest.mark.parametrize("decision", [[4, 4], [0, 48], [48], [2, 3, 8, 1]])
def test_a_decision_that_is_not_a_perfect_tile_is_refused(decision):
    with pytest.raises(tg.ScheduleError, match="not 3 positive factors of 48"):
        check_perfect_tile(decision, 48, 3)


def test_one_factor_is_the_extent_and_must_fit_the_innermost_limit():
    assert sample_perfect_tile(random.Random(0), 7, 1) == [7]
    with pytest.raises(tg.ScheduleError, match="at most 4"):
        sample_perfect_tile(random.Random(0), 7, 1, 4)


def test_categorical_respects_weights_and_refuses_bad_ones():
    rng = random.Random(1)
    assert {sample_categorical(rng, [10, 20, 30], [0, 1, 0]) for _ in range(20)} == {1}
    for probs in ([1.0], [-1, 1, 1], [0, 0, 0]):
        with pytest.raises(tg.ScheduleError, match="probs"):
            sample_categorical(rng, [10, 20, 30], probs)
    with pytest.raises(tg.ScheduleError, match="at least one"):
        sample_categorical(rng, [], None)
