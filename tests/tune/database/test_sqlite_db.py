import sqlite3

import pytest

import tilegraph as tg
from tilegraph.tune.database import SCHEMA_VERSION, MemoryDatabase, Record, SQLiteDatabase
from tilegraph.tune.database.sqlite_db import default_path


def _trace(n: int, wk: str = "wk") -> str:
    return f'{{"instructions": [{{"kind": "split", "inputs": {{"n": {n}}}}}], "version": 1, "workload_key": "{wk}"}}'


def _ok(n: int, latency: float, fp: str = "fp-a", wk: str = "wk") -> Record:
    return Record(wk, fp, _trace(n, wk), "ok", latency_s=latency, latency_min_s=latency, latency_max_s=latency,
                  samples=(latency,), policy={"min_time_s": 0.1})


@pytest.fixture(params=["sqlite", "memory"])
def db(request, tmp_path):
    d = SQLiteDatabase(tmp_path / "t.db") if request.param == "sqlite" else MemoryDatabase()
    yield d
    d.close()


def test_commit_lookup_best_and_top_k(db):
    assert db.best("wk", "fp-a") is None
    assert db.commit_record(_ok(1, 3e-3))
    assert db.commit_record(_ok(2, 1e-3))
    assert db.commit_record(Record("wk", "fp-a", _trace(3), "crash", message="SIGSEGV"))
    assert not db.commit_record(_ok(1, 5e-4)), "the same trace is recorded once"
    assert db.has_record("wk", "fp-a", _trace(2))
    assert db.has_record("wk", "fp-a", _trace(2).replace(", ", ",")), "hash ignores JSON whitespace"
    assert not db.has_record("wk", "fp-b", _trace(2))
    assert db.best("wk", "fp-a").latency_s == 1e-3
    assert [r.latency_s for r in db.top_k("wk", "fp-a", 5)] == [1e-3, 3e-3]
    assert len(db.records("wk", "fp-a")) == 3
    assert [r.kind for r in db.records(kind="crash")] == ["crash"]


def test_replace_record_keeps_one_record_of_a_trace(db):
    assert db.commit_record(_ok(1, 3e-3))
    db.replace_record(_ok(1, 2e-3))
    db.replace_record(_ok(2, 4e-3))  # nothing to replace: stored
    assert sorted(r.latency_s for r in db.records("wk", "fp-a")) == [2e-3, 4e-3]
    db.replace_record(Record("wk", "fp-a", _trace(2), "crash", message="SIGSEGV"))
    assert [r.kind for r in db.records("wk", "fp-a") if r.trace_hash == _ok(2, 0).trace_hash] == ["crash"]


def test_foreign_fingerprint_is_a_miss(db):
    db.commit_record(_ok(1, 1e-3, fp="other-machine"))
    assert db.best("wk", "fp-a") is None
    assert db.measured_hashes("wk", "fp-a") == set()


def test_distill_keeps_only_the_best_per_workload_and_target(db):
    for n, lat in enumerate([3e-3, 1e-3, 2e-3]):
        db.commit_record(_ok(n, lat))
    db.commit_record(Record("wk", "fp-a", _trace(9), "wrong_answer", message="max error 3"))
    db.commit_record(_ok(1, 7e-3, fp="fp-b"))
    removed = db.distill()
    assert removed == 3
    assert [r.latency_s for r in db.records("wk", "fp-a")] == [1e-3]
    assert [r.latency_s for r in db.records("wk", "fp-b")] == [7e-3]


def test_export_import_and_merge(tmp_path):
    wl = tg.Workload(*_tiny())
    with SQLiteDatabase(tmp_path / "a.db") as a, SQLiteDatabase(tmp_path / "b.db") as b:
        a.commit_workload(wl)
        a.commit_record(_ok(1, 2e-3, wk=wl.key))
        b.commit_record(_ok(2, 1e-3, wk=wl.key))
        b.commit_record(_ok(1, 9e-3, wk=wl.key))  # same trace as a's: a keeps its own
        assert a.merge(tmp_path / "b.db") == 1
        assert a.best(wl.key, "fp-a").latency_s == 1e-3
        assert len(a.records()) == 2
        assert a.export_jsonl(tmp_path / "x.jsonl") == 2
    with MemoryDatabase() as c:
        assert c.import_jsonl(tmp_path / "x.jsonl") == 2
        assert c.import_jsonl(tmp_path / "x.jsonl") == 0
        assert [w.key for w in c.workloads()] == [wl.key]
        assert c.workload(wl.key).shapes == {"A": [2, 3], "B": [2, 3]}


def _tiny():
    a = tg.te.placeholder((2, 3), name="A")
    b = tg.te.compute((2, 3), lambda i, j: a[i, j] * 2.0, name="B")
    return [a], [b]


def test_schema_version_and_wal(tmp_path):
    path = tmp_path / "v.db"
    SQLiteDatabase(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT version FROM migrations").fetchall() == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
    conn.close()


def test_default_path_is_under_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "d"))
    assert default_path() == tmp_path / "d" / "tuning.db"


@pytest.mark.parametrize("setup, message", [
    (lambda p: p.write_bytes(b"this is not sqlite at all, just text" * 40), "not a tilegraph tuning database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE x (a)"), "not a tilegraph tuning database"),
    (lambda p: sqlite3.connect(p).execute("PRAGMA user_version = 99"), "schema version 99"),
    (lambda p: p.mkdir(), "is not a regular file"),
])
def test_unusable_files_raise_one_clear_line(tmp_path, setup, message):
    path = tmp_path / "bad.db"
    setup(path)
    with pytest.raises(tg.DatabaseError, match=message) as info:
        SQLiteDatabase(path)
    assert "\n" not in str(info.value)


def test_unwritable_location_raises_database_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(tg.DatabaseError, match="cannot create the folder") as info:
        SQLiteDatabase(blocker / "sub" / "t.db")
    assert "\n" not in str(info.value)


def test_merge_of_missing_file_is_a_database_error(tmp_path):
    with SQLiteDatabase(tmp_path / "t.db") as db, pytest.raises(tg.DatabaseError, match="does not exist"):
        db.merge(tmp_path / "nope.db")


def test_malformed_jsonl_import(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"record": {"kind": "ok"}}\n')
    with MemoryDatabase() as db, pytest.raises(tg.DatabaseError, match="bad.jsonl:1"):
        db.import_jsonl(p)


def test_record_rejects_unknown_kind_and_ok_without_latency():
    with pytest.raises(ValueError, match="kind"):
        Record("wk", "fp", "{}", "fast")
    with pytest.raises(ValueError, match="latency"):
        Record("wk", "fp", "{}", "ok")
