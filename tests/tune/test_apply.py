"""tune/apply.py: the best recorded schedule, from a database object or a path; a miss is None."""

import tilegraph as tg
from tilegraph.tune.apply import best_schedule
from tilegraph.tune.database import MemoryDatabase, Record
from tilegraph.tune.measure import resolve_target

TARGET = "cpu -isa=avx2 -cores=1"


def _wl():
    return tg.workloads.from_spec("matmul:8,4,6")


def test_the_fastest_replayable_record_wins(tmp_path):
    wl = _wl()
    fp = str(resolve_target(TARGET).fingerprint)
    db = MemoryDatabase()
    db.commit_workload(wl)
    for factor, latency in ((2, 3e-3), (4, 1e-3)):
        sch = tg.Schedule(wl)
        sch.split(sch.loops(wl.outputs[0])[0], factor)
        db.commit_record(Record(wl.key, fp, sch.trace.to_json(), "ok", latency_s=latency, samples=(latency,)))
    broken = '{"instructions": [{"kind": "split", "inputs": {"loop": "zz", "factors": [null, 2]}, "outputs": []}], ' \
             f'"version": 1, "workload_key": "{wl.key}"}}'
    db.commit_record(Record(wl.key, fp, broken, "ok", latency_s=1e-4, samples=(1e-4,)))
    sch = best_schedule(wl, TARGET, db)
    assert sch is not None and "range(4)" in str(sch), "the stale faster record is skipped"


def test_misses_are_none(tmp_path):
    wl = _wl()
    assert best_schedule(wl, TARGET, MemoryDatabase()) is None
    assert best_schedule(wl, TARGET, tmp_path / "absent.db") is None
    assert not (tmp_path / "absent.db").exists(), "reading never creates a database"
