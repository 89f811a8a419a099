"""tune/database/record.py: what a record holds, how a run becomes one, and JSON both ways."""

import pytest

import tilegraph as tg
from tilegraph.tune.database import Record, WorkloadEntry
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.result import RunResult


def test_from_run_keeps_the_statistics_and_the_policy():
    rec = Record.from_run("wk", "fp", "{}", RunResult("ok", samples=(2.0, 1.0, 3.0)), MeasurePolicy(min_time_s=0.5),
                          {"strategy": "random"})
    assert rec.ok and rec.latency_s == 2.0 and rec.latency_min_s == 1.0 and rec.spread == 1.0
    assert rec.policy["min_time_s"] == 0.5 and rec.meta == {"strategy": "random"} and rec.version == tg.__version__
    assert Record.from_dict(rec.to_dict()) == rec


def test_invalid_records_are_refused():
    with pytest.raises(ValueError, match="kind"):
        Record("wk", "fp", "{}", "great")
    with pytest.raises(ValueError, match="latency"):
        Record("wk", "fp", "{}", "ok")
    with pytest.raises(ValueError, match="text fields"):
        Record.from_dict({"workload_key": 3})
    with pytest.raises(ValueError, match="malformed"):
        Record.from_dict({"workload_key": "w", "target_fingerprint": "f", "trace_json": "{}", "kind": "ok",
                          "latency_s": 1.0, "created": "yesterday"})


def test_workload_entries():
    wl = tg.workloads.from_spec("matmul:4,3,2")
    entry = WorkloadEntry.of(wl)
    assert entry.key == wl.key and entry.canonical == wl.canonical_text and WorkloadEntry.from_dict(entry.to_dict()) == entry
    with pytest.raises(ValueError, match="positive integers"):
        WorkloadEntry.from_dict({**entry.to_dict(), "shapes": {"a": [0]}})
