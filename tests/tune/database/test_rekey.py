"""Schema 1 -> 2: workload keys of the computation only. Old databases and exports are re-keyed;
their records apply where they should (the workload they were measured on), never elsewhere."""

import hashlib
import json
import sqlite3

import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.tune.apply import best_schedule
from tilegraph.tune.database import MemoryDatabase, Record, SQLiteDatabase, WorkloadEntry
from tilegraph.tune.database.rekey import current_canonical_text, rekey_entry
from tilegraph.tune.database.sqlite_db import _SCHEMA_V1
from tilegraph.tune.measure import resolve_target

TARGET = "cpu -isa=avx2 -cores=1"


def _library():
    a, b = te.placeholder((12, 8), name="A"), te.placeholder((8, 6), name="B")
    return tg.Workload([a, b], [ops.matmul(a, b)])


def _hand_written(tag=""):
    x, y = te.placeholder((12, 8), name="X"), te.placeholder((8, 6), name="Y")
    r = te.reduce_axis(8, "r")
    return tg.Workload([x, y], [te.compute((12, 6), lambda m, n: te.sum(x[m, r] * y[r, n], axis=r), name="Z", tag=tag)])


def v1_canonical(wl):
    """The canonical text schema 1 hashed: each compute line ended with its tag and attrs."""
    lines = wl.canonical_text.split("\n")
    computes = iter(wl.computes)
    out = []
    for line in lines:
        if " = " in line:
            op = next(computes).op
            attrs = ",".join(f"{k}={v}" for k, v in op.attrs)
            line = f"{line} tag={op.tag} {attrs}".rstrip()
        out.append(line)
    return "\n".join(out)


def v1_key(wl):
    return hashlib.sha256(v1_canonical(wl).encode()).hexdigest()[:24]


def _old_trace(wl, factor):
    """A schedule as schema 1 stored it: recorded under the old key, without a names list."""
    sch = tg.Schedule(wl)
    i = sch.loops(wl.outputs[0])[0]
    sch.split(i, factor)
    d = sch.trace.to_dict()
    d["workload_key"] = v1_key(wl)
    del d["names"]
    return json.dumps(d, sort_keys=True)


def _ok(key, trace, latency):
    return Record(key, resolve_target(TARGET).fingerprint, trace, "ok", latency_s=latency, samples=(latency,))


def write_v1_database(path, entries):
    """A schema-1 file holding (workload, [(factor, latency)]) entries, as tilegraph 0.1 wrote it."""
    conn = sqlite3.connect(path)
    conn.executescript(_SCHEMA_V1)
    conn.execute("INSERT INTO migrations VALUES (1, 0)")
    conn.execute("PRAGMA user_version = 1")
    for wl, measurements in entries:
        entry = WorkloadEntry(v1_key(wl), v1_canonical(wl), wl.op_name, {k: list(v) for k, v in wl.shapes.items()})
        conn.execute("INSERT INTO workloads VALUES (?, ?, ?, ?)",
                     (entry.key, entry.canonical, entry.op_name, json.dumps(entry.shapes)))
        for factor, latency in measurements:
            rec = _ok(entry.key, _old_trace(wl, factor), latency)
            conn.execute("INSERT INTO records (workload_key, target_fingerprint, trace_json, trace_hash, kind, latency_s, "
                         "samples, policy, message, meta, version, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                         (rec.workload_key, rec.target_fingerprint, rec.trace_json, rec.trace_hash, "ok", latency,
                          "[]", "{}", "", "{}", "0.1.0", 1.0))
    conn.commit()
    conn.close()


def test_the_v1_key_differed_and_the_current_text_drops_only_labels():
    lib, hand = _library(), _hand_written()
    assert v1_key(lib) != v1_key(hand) and lib.key == hand.key
    assert current_canonical_text(v1_canonical(lib)) == lib.canonical_text
    assert rekey_entry(WorkloadEntry(lib.key, lib.canonical_text, "matmul", {})) is None


def test_an_old_database_is_migrated_and_its_records_apply_where_they_should(tmp_path):
    path = tmp_path / "old.db"
    lib = _library()
    write_v1_database(path, [(lib, [(4, 2e-3), (3, 1e-3)])])
    with SQLiteDatabase(path) as db:
        assert [w.key for w in db.workloads()] == [lib.key]
        records = db.records(lib.key)
        assert len(records) == 2 and all(json.loads(r.trace_json)["workload_key"] == lib.key for r in records)
        sch = best_schedule(lib, TARGET, db)
        assert sch is not None and "i_1 in range(3)" in str(sch), "the best old record applies to its workload"
        # the hand-written matmul has the key but not the names the old (nameless) trace speaks
        assert best_schedule(_hand_written(), TARGET, db) is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert conn.execute("SELECT version FROM migrations ORDER BY version").fetchall() == [(1,), (2,)]


def test_old_keys_that_meet_under_one_new_key_keep_all_their_records(tmp_path):
    path = tmp_path / "old.db"
    lib, tagged = _library(), _hand_written(tag="matmul")
    write_v1_database(path, [(lib, [(4, 2e-3)]), (_hand_written(), [(2, 3e-3)]), (tagged, [(3, 1e-3)])])
    with SQLiteDatabase(path) as db:
        assert [w.key for w in db.workloads()] == [lib.key]
        assert sorted(r.latency_s for r in db.records(lib.key)) == [1e-3, 2e-3, 3e-3]
        assert "i_1 in range(4)" in str(best_schedule(lib, TARGET, db)), "the best replayable record wins"


def test_a_read_only_open_migrates_in_memory_and_leaves_the_file_alone(tmp_path):
    path = tmp_path / "old.db"
    lib = _library()
    write_v1_database(path, [(lib, [(4, 2e-3)])])
    before = path.read_bytes()
    path.chmod(0o444)
    with SQLiteDatabase(path, readonly=True) as db:
        assert [r.workload_key for r in db.records()] == [lib.key]
        assert best_schedule(lib, TARGET, db) is not None
    assert path.read_bytes() == before
    assert sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True).execute("PRAGMA user_version").fetchone()[0] == 1


@pytest.mark.parametrize("dest", ["memory", "sqlite"])
def test_an_old_export_is_re_keyed_on_import(tmp_path, dest):
    lib = _library()
    old_db = tmp_path / "old.db"
    write_v1_database(old_db, [(lib, [(4, 2e-3)])])
    conn = sqlite3.connect(old_db)
    (key, canonical, op_name, shapes), = conn.execute("SELECT * FROM workloads").fetchall()
    trace, = conn.execute("SELECT trace_json FROM records").fetchone()
    export = tmp_path / "old.jsonl"
    export.write_text(json.dumps({"workload": {"key": key, "canonical": canonical, "op_name": op_name,
                                               "shapes": json.loads(shapes)}}) + "\n"
                      + json.dumps({"record": _ok(key, trace, 2e-3).to_dict()}) + "\n")
    db = MemoryDatabase() if dest == "memory" else SQLiteDatabase(tmp_path / "new.db")
    assert db.import_jsonl(export) == 1
    assert [w.key for w in db.workloads()] == [lib.key]
    assert best_schedule(lib, TARGET, db) is not None
    db.close()
