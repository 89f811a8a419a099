import numpy as np
import pytest

from tilegraph.schedule.trace import canonical_trace_json, trace_hash
from tilegraph.tune.measure import MeasurePolicy, compare_outputs, time_runs


def test_compare_outputs_accepts_fp32_rounding_and_rejects_errors():
    ref = np.linspace(-100, 100, 50).reshape(5, 10)
    assert compare_outputs([ref.astype(np.float32)], [ref])[0]
    bad = ref.copy()
    bad[2, 3] += 1.0
    ok, max_error, message = compare_outputs([bad], [ref])
    assert not ok and max_error == pytest.approx(1.0) and "max abs error 1" in message


def test_compare_outputs_rejects_poison_left_in_output():
    out = np.zeros((3, 3), np.float32)
    out[1, 1] = np.nan
    ok, _, message = compare_outputs([out], [np.zeros((3, 3))])
    assert not ok and "non-finite" in message


def test_compare_outputs_accepts_only_the_reference_s_own_non_finite_values():
    ref = np.array([1.0, -np.inf, np.nan, 2.0])
    assert compare_outputs([np.array([1.0, -np.inf, np.nan, 2.0], np.float32)], [ref])[0]
    for got in ([1.0, np.inf, np.nan, 2.0], [1.0, -np.inf, 0.0, 2.0], [1.0, 5.0, np.nan, 2.0],
                [np.nan, -np.inf, np.nan, 2.0]):
        ok, _, message = compare_outputs([np.array(got)], [ref])
        assert not ok and "non-finite" in message


def test_compare_outputs_rejects_shape_and_count_mismatch():
    assert not compare_outputs([np.zeros(3)], [np.zeros(4)])[0]
    assert not compare_outputs([np.zeros(3)], [np.zeros(3), np.zeros(3)])[0]


def test_time_runs_respects_min_repeats_and_min_time():
    calls = []
    samples = time_runs(lambda: calls.append(1), MeasurePolicy(warmup=3, min_time_s=0.0, min_repeats=7))
    assert len(samples) == 7 and len(calls) >= 10, "fast runs are batched per sample, as kernel.time() does"
    samples = time_runs(lambda: None, MeasurePolicy(warmup=0, min_time_s=0.01, min_repeats=1))
    assert len(samples) > 10


@pytest.mark.parametrize("kwargs", [{"min_repeats": 0}, {"warmup": -1}, {"timeout_s": 0}, {"num_threads": 0},
                                    {"min_time_s": -1}])
def test_policy_rejects_bad_values(kwargs):
    with pytest.raises(ValueError, match="MeasurePolicy"):
        MeasurePolicy(**kwargs)


def test_policy_resolves_threads_and_serialises():
    p = MeasurePolicy().resolved()
    assert p.num_threads >= 1
    assert '"num_threads"' in p.to_json()


def test_trace_hash_ignores_formatting_only():
    a = '{"b": 1, "a": [1, 2]}'
    assert trace_hash(a) == trace_hash('{"a":[1,2],"b":1}')
    assert trace_hash(a) != trace_hash('{"a":[2,1],"b":1}')
    assert canonical_trace_json(a) == '{"a":[1,2],"b":1}'


def test_quantized_outputs_may_be_one_step_off_and_exact_sums_may_not():
    """A uint8/int8 result rounds a float: float32 against the float64 reference may land on the
    other side of a tie, one step; an int32 result (an exact integer sum) must be exact."""
    ref = np.array([0.0, 17.0, 255.0, 128.0])
    assert compare_outputs([np.array([1, 17, 254, 128], np.uint8)], [ref])[0]
    assert not compare_outputs([np.array([2, 17, 255, 128], np.uint8)], [ref])[0]
    assert not compare_outputs([np.array([1, 17, 255, 128], np.int32)], [ref])[0]


def test_a_bfloat16_output_may_be_one_unit_in_its_last_place_off():
    """A kernel writing bfloat16 rounds its float32 result once; vdpbf16ps moves that result within
    float32 rounding, and across a tie the stored value moves one bfloat16 ulp (2**-7 relative at
    1.0). Two ulps, or the same error in a float32 output, fail."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ref = np.linspace(1.0, 1.98, 50)
    out = ref.astype(ml_dtypes.bfloat16)
    ulp = np.array(2.0 ** -7, ml_dtypes.bfloat16)
    out[7] = out[7] + ulp  # rounded the other way at a tie
    assert compare_outputs([out], [ref])[0]
    out[9] = out[9] + ulp + ulp + ulp
    assert not compare_outputs([out], [ref])[0]
    assert not compare_outputs([ref.astype(np.float32) + np.float32(2.0 ** -7)], [ref])[0]


def test_a_dequantized_float_output_may_be_one_step_off():
    """A float output on a grid ((q - z) * s, a DequantizeLinear after the product) may be one step
    s from the reference at a tie; off the grid, or more than a step, or random floats: no."""
    from tilegraph.tune.measure import quantized_step

    rng = np.random.default_rng(0)
    q = rng.integers(0, 256, 500)
    ref = (q - 7) * 0.0125
    assert quantized_step(ref) == pytest.approx(0.0125)
    off = ref.astype(np.float32)
    off[3] += np.float32(0.0125)  # one step: a tie landed the other way
    assert compare_outputs([off], [ref])[0]
    off[4] += np.float32(0.03)  # more than a step
    assert not compare_outputs([off], [ref])[0]
    floats = rng.standard_normal(500)
    assert quantized_step(floats) == 0.0
    assert quantized_step(ref[:10]) == 0.0  # too few values to tell a grid
    assert quantized_step(np.floor(floats * 20)) == 0.0  # a floor of floats is exact: no slack
    bumped = floats.astype(np.float32)
    bumped[0] += np.float32(0.01)
    assert not compare_outputs([bumped], [floats])[0]
    # the grid as a float32 reference computes it: (q - z) * s rounded, its gaps uneven in the last
    # bits (a QDQ ResNet-50's fused convolutions were refused for this on an AVX2 target)
    scale = np.float32(0.01471979)
    grid = (np.arange(256, dtype=np.float32) * scale).astype(np.float64)
    assert quantized_step(grid) == pytest.approx(float(scale), rel=1e-6)
    tie = grid.astype(np.float32)
    tie[200] += scale
    assert compare_outputs([tie], [grid])[0]


def test_a_slow_check_run_is_its_own_sample_and_a_cold_one_is_timed_in_full():
    from tilegraph.tune.measure import SLOW_CHECK_IS_SAMPLE_S, time_slow_candidate

    policy = MeasurePolicy()
    calls = []
    assert time_slow_candidate(lambda: calls.append(1), 0.5, None, policy) is None, "no best yet"
    assert time_slow_candidate(lambda: calls.append(1), 2e-3, 1e-3, policy) is None, "within 3x the best"
    assert time_slow_candidate(lambda: calls.append(1), 5e-4, 1e-5, policy) is None, "too short to judge"
    assert time_slow_candidate(lambda: calls.append(1), SLOW_CHECK_IS_SAMPLE_S, 1e-3, policy) == [SLOW_CHECK_IS_SAMPLE_S]
    assert not calls
    # over 3x the best at its check run, but the warm sample is fast: the check run was cold
    assert time_slow_candidate(lambda: calls.append(1), 0.05, 1e-3, policy) is None and calls
    off = MeasurePolicy(time_once_over=None)
    assert time_slow_candidate(lambda: None, 1.0, 1e-3, off) is None


def test_time_runs_stops_at_min_repeats_only_when_every_sample_is_clearly_slower():
    import time

    policy = MeasurePolicy(warmup=0, min_time_s=0.05, min_repeats=5)
    run = lambda: time.sleep(2e-3)  # noqa: E731
    assert len(time_runs(run, policy, best_s=1e-3)) == 5, "2 ms against a 1-ms best"
    assert len(time_runs(run, policy, best_s=5e-3)) > 5, "not over 1.2x the best: timed in full"
    assert len(time_runs(run, policy)) > 5, "no best: timed in full"


@pytest.mark.parametrize("factor", [1.0, 0, -2, "3"])
def test_policy_rejects_bad_slow_factors(factor):
    with pytest.raises(ValueError, match="time_once_over"):
        MeasurePolicy(time_once_over=factor)
    with pytest.raises(ValueError, match="stop_early_over"):
        MeasurePolicy(stop_early_over=factor)


def test_with_evict_constants_only_the_constant_inputs_are_evicted(monkeypatch):
    from tilegraph.runtime import evict
    from tilegraph.tune import measure

    seen = []
    monkeypatch.setattr(evict, "array_evictor", lambda arrays: seen.append(list(arrays)) or (lambda: None))
    x, w, b = np.ones(3), np.ones(4), np.ones(5)
    on = MeasurePolicy(evict_constants=True)
    assert measure.constant_evictor([x, w, b], [False, False, False], on) is None  # nothing constant
    assert measure.constant_evictor([x, w, b], [False, True, True], MeasurePolicy()) is None  # off by default
    assert not seen
    assert measure.constant_evictor([x, w, b], [False, True, True], on) is not None
    assert [a is w for a in seen[0]] == [True, False] and seen[0][1] is b


def test_where_lines_cannot_be_evicted_every_cache_is_flushed_instead(monkeypatch):
    from tilegraph.runtime import evict
    from tilegraph.runtime.timer import CacheFlusher
    from tilegraph.tune import measure

    monkeypatch.setattr(evict, "array_evictor", lambda arrays: None)
    fallback = measure.constant_evictor([np.ones(3)], [True], MeasurePolicy(evict_constants=True))
    assert isinstance(fallback, CacheFlusher)


def test_time_runs_evicts_before_every_sample():
    calls = []
    samples = time_runs(lambda: calls.append("run"), MeasurePolicy(warmup=1, min_time_s=0.0, min_repeats=4),
                        evict=lambda: calls.append("evict"))
    assert len(samples) == 4
    assert calls[0] == "run" and calls[1:] == ["evict", "run"] * 4  # one warm-up, then one call per eviction


def test_a_whole_cache_flush_stands_in_for_the_eviction():
    evicted = []
    samples = time_runs(lambda: None, MeasurePolicy(warmup=0, min_time_s=0.0, min_repeats=3, flush_cache=True),
                        evict=lambda: evicted.append(1))
    assert len(samples) == 3 and not evicted  # flush_cache already evicted everything, the constants too


def test_outputs_are_cut_to_run_time_extents_only_for_kernels_with_dims():
    from tilegraph.tune.measure import outputs_within_extents

    full = np.arange(12, dtype=np.float32).reshape(4, 3)
    ref = full[:2].astype(np.float64)  # valid_regions: two of four rows hold data
    ok, _, message = compare_outputs(outputs_within_extents([full], [ref], None), [ref])
    assert not ok and "shape" in message  # no dims: an output of another shape stays an error
    assert compare_outputs(outputs_within_extents([full], [ref], [(4, 3)]), [ref])[0]
    flat = full.reshape(-1)  # a GPU kernel's output comes back flat
    assert compare_outputs(outputs_within_extents([flat], [ref], [(4, 3)]), [ref])[0]
