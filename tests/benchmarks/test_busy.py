"""benchmarks/busy.py: its busy phases, its per-call statistics and its table of slowdowns."""

import pytest

from benchmarks import busy


def test_busy_phases_name_their_competing_programs():
    assert busy.competitor_programs("0") == []
    assert busy.competitor_programs("2") == [busy.SPIN, busy.SPIN]
    (train,) = busy.competitor_programs("torch:3")
    assert "torch.set_num_threads(3)" in train
    for bad in ("two", "torch:", "numpy:2", "-1"):
        with pytest.raises(ValueError, match="expected N or torch:N"):
            busy.competitor_programs(bad)


def test_percentiles_and_summaries_are_per_call():
    calls = [k / 1000 for k in range(1, 11)]  # 1..10 ms
    assert busy.percentile(calls, 0.5) in (0.005, 0.006)
    assert busy.percentile(calls, 0.9) == 0.009 and busy.percentile(calls, 1.0) == 0.010
    s = busy.summary(calls)
    assert s["calls"] == 10 and s["max_ms"] == pytest.approx(10.0) and s["p90_ms"] == pytest.approx(9.0)


def test_time_calls_alternates_and_prepares_each_turn():
    order = []
    contenders = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    prepared = []
    calls = busy.time_calls(contenders, rounds=2, seconds=0.0, prepare={"a": lambda: prepared.append("a")})
    assert [len(v) for v in calls.values()] == [2, 2]  # one call per turn when the turn is already over
    assert order == ["a", "b", "a", "b", "a", "b"]  # the warm-up, then two rounds
    assert prepared == ["a", "a", "a"]


def test_the_table_gives_each_systems_slowdown_against_its_own_quiet_median():
    phases = {"quiet": {"median_ms": 2.0, "p90_ms": 2.2, "max_ms": 3.0},
              "busy 1": {"median_ms": 3.0, "p90_ms": 4.0, "max_ms": 9.0}}
    rows = [{"model": "m", "systems": {"tilegraph": phases,
                                       "onnxruntime": {"quiet": {**phases["quiet"], "median_ms": 1.0},
                                                       "busy 1": phases["busy 1"]}}}]
    meta = {"command": "c", "cpu": "cpu", "threads": 2, "date": "d", "phases": ["quiet", "busy 1"]}
    lines = [x for x in busy._markdown(rows, meta).splitlines() if x.startswith("| m ")]
    assert lines[0].endswith("| 2.00 / 2.20 / 3.0 | 3.00 / 4.00 / 9.0 | 1.50x |")
    assert lines[1].endswith("| 3.00x |")
