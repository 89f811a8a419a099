import os

import pytest

import tilegraph as tg
from tilegraph.runtime import threads


@pytest.fixture(autouse=True)
def restore():
    yield
    threads.reset_num_threads()


def test_default_is_available_cores():
    assert threads.get_num_threads() == len(os.sched_getaffinity(0))
    assert threads.configured_num_threads() is None


def test_set_and_get():
    tg.set_num_threads(3)
    assert tg.get_num_threads() == 3 and threads.configured_num_threads() == 3
    threads.reset_num_threads()
    assert threads.configured_num_threads() is None


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (2.0, TypeError), (True, TypeError),
                                        ("4", TypeError)])
def test_rejects_bad_counts(bad, error):
    with pytest.raises(error, match="n must be"):
        tg.set_num_threads(bad)
    assert threads.configured_num_threads() is None
