"""tune/database/base.py: what every Database gets from the base class (distill, exports, imports,
best_schedule), exercised on the in-memory implementation."""

import logging

import tilegraph as tg
from tilegraph.tune.database import MemoryDatabase, Record
from tilegraph.tune.measure import resolve_target

TARGET = "cpu -isa=avx2 -cores=1"


def _filled():
    wl = tg.workloads.from_spec("matmul:8,4,6")
    fp = str(resolve_target(TARGET).fingerprint)
    db = MemoryDatabase()
    db.commit_workload(wl)
    for factor, latency in ((2, 3e-3), (4, 1e-3), (8, 2e-3)):
        sch = tg.Schedule(wl)
        sch.split(sch.loops(wl.outputs[0])[0], factor)
        db.commit_record(Record(wl.key, fp, sch.trace.to_json(), "ok", latency_s=latency, samples=(latency,)))
    crashed = tg.Schedule(wl)
    crashed.split(crashed.loops(wl.outputs[0])[0], 3)
    db.commit_record(Record(wl.key, fp, crashed.trace.to_json(), "crash", message="SIGSEGV"))
    return wl, fp, db


def test_distill_keeps_the_best_record_per_workload_and_target():
    wl, fp, db = _filled()
    assert db.distill() == 3 and [r.latency_s for r in db.records()] == [1e-3]


def test_export_then_import_adds_only_what_is_new(tmp_path):
    _, _, db = _filled()
    path = tmp_path / "x.jsonl"
    assert db.export_jsonl(path) == 4
    other = MemoryDatabase()
    assert other.import_jsonl(path) == 4 and other.import_jsonl(path) == 0
    assert other.merge_from(db) == 0


def test_best_schedule_replays_the_fastest_and_reports_a_miss_once(caplog):
    wl, _, db = _filled()
    assert "range(4)" in str(db.best_schedule(wl, TARGET))
    other = tg.workloads.from_spec("matmul:9,4,6")
    with caplog.at_level(logging.INFO, logger="tilegraph.tune"):
        assert db.best_schedule(other, TARGET) is None and db.best_schedule(other, TARGET) is None
    assert sum("no tuning record" in r.message for r in caplog.records) == 1
