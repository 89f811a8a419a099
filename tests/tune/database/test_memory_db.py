"""MemoryDatabase: the SQLite database on a private in-memory connection, nothing on disk."""

import tilegraph as tg
from tilegraph.tune.database import MemoryDatabase, Record


def test_memory_databases_are_private_and_behave_like_the_file():
    a, b = MemoryDatabase(), MemoryDatabase()
    wl = tg.workloads.from_spec("matmul:4,3,2")
    a.commit_workload(wl)
    assert a.commit_record(Record(wl.key, "fp", "{}", "ok", latency_s=1.0, samples=(1.0,)))
    assert not a.commit_record(Record(wl.key, "fp", "{ }", "ok", latency_s=2.0, samples=(2.0,))), "same trace"
    assert len(a.records()) == 1 and b.records() == [] and a.files() == [] and repr(a) == "MemoryDatabase()"
