import time

import pytest

from tilegraph.runtime.timer import CacheFlusher, TimingResult, measure


def test_from_samples_statistics():
    result = TimingResult.from_samples([1.0, 3.0, 2.0])
    assert (result.median, result.min, result.max, result.mean) == (2.0, 1.0, 3.0, 2.0)
    assert result.spread == pytest.approx((2 / 3) ** 0.5 / 2)
    assert result.samples == (1.0, 3.0, 2.0)
    with pytest.raises(ValueError):
        TimingResult.from_samples([])


def test_warmup_and_repeat_counts():
    calls = []
    result = measure(lambda: calls.append(1), warmup=3, min_time=0.0, repeat=4, number=2)
    assert len(calls) == 3 + 4 * 2 and len(result.samples) == 4


def test_repeats_until_min_time():
    result = measure(lambda: time.sleep(0.002), warmup=0, min_time=0.05, repeat=1, number=1)
    assert sum(result.samples) >= 0.05 and len(result.samples) >= 10
    assert all(sample >= 0.002 for sample in result.samples)


def test_fast_calls_are_batched():
    calls = []
    measure(lambda: calls.append(1), warmup=5, min_time=0.0, repeat=2)
    assert len(calls) > 5 + 2


def test_flush_runs_before_every_sample_and_forces_single_calls():
    events = []
    result = measure(lambda: events.append("run"), warmup=0, min_time=0.0, repeat=3,
                     flush=lambda: events.append("flush"))
    assert events == ["flush", "run"] * 3 and len(result.samples) == 3


@pytest.mark.parametrize("kwargs", [{"warmup": -1}, {"repeat": 0}, {"min_time": -1.0}, {"number": 0}])
def test_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        measure(lambda: None, **kwargs)


def test_cache_flusher_touches_its_buffer():
    flusher = CacheFlusher(1 << 16)
    flusher()
    assert flusher.buffer.nbytes == 1 << 16 and flusher.buffer[0] == 1.0
    with pytest.raises(ValueError):
        CacheFlusher(0)
