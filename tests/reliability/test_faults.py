"""Faults the database must survive, kept in the default run: two tuners writing one database at
once, SIGKILL in the middle of an import, a disk that fills up, a database that cannot be
written. (tests/tune/test_kill_resume.py, slow-marked, SIGKILLs a tuner at random moments.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from tests.reliability.conftest import digest, refused, tmpfs
from tilegraph.tune.database import SQLiteDatabase

pytestmark = pytest.mark.needs_cc

TUNER = textwrap.dedent("""
    import sys
    import tilegraph as tg
    from tilegraph.tune import MeasurePolicy
    tg.tune(sys.argv[2], strategy="random", trials=int(sys.argv[3]), db=sys.argv[1], seed=int(sys.argv[4]),
            progress=False, policy=MeasurePolicy(min_time_s=0.002, min_repeats=3))
""")


def _integrity(path) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_two_concurrent_tuners_on_one_database_lose_nothing(dirs):
    db = dirs / "shared.db"
    specs = [("matmul:8,8,8", 4, 1), ("matmul:8,8,8", 4, 2), ("softmax:4,9", 3, 3)]
    procs = [subprocess.Popen([sys.executable, "-c", TUNER, str(db), spec, str(n), str(seed)], stderr=subprocess.PIPE,
                              text=True) for spec, n, seed in specs[:2]]
    procs.append(subprocess.Popen([sys.executable, "-c", TUNER, str(db), *map(str, specs[2])], stderr=subprocess.PIPE,
                                  text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    _integrity(db)
    with SQLiteDatabase(db, readonly=True) as d:
        records = d.records()
        keys = {(r.workload_key, r.target_fingerprint, r.trace_hash) for r in records}
        assert len(keys) == len(records), "a trace was recorded twice"
        assert len({r.workload_key for r in records}) == 2 and len(d.workloads()) == 2
        # same workload from two seeds: both tuners' measurements are there (distinct traces, at least 4)
        assert len(records) >= 4 + 3


@pytest.fixture(scope="module")
def big_export(tuned_db, tmp_path_factory):
    """An export of COPIES distinct valid records (with their timing samples), so an import takes
    seconds and can be killed in the middle; made once per module."""
    folder = tmp_path_factory.mktemp("export")
    with SQLiteDatabase(tuned_db, readonly=True) as db:
        workloads = db.workloads()
        record = db.records()[0].to_dict()
    body = [json.dumps({"workload": w.to_dict()}) for w in workloads]
    body += [json.dumps({"record": dict(record, target_fingerprint=f"cpu-fake-{n}")}) for n in range(COPIES)]
    path = folder / "big.jsonl"
    path.write_text("\n".join(body) + "\n")
    return path


COPIES = 800


@pytest.mark.parametrize("attempt", range(3))
def test_sigkill_during_an_import_adds_all_or_nothing(big_export, tmp_path, attempt):
    target = tmp_path / "target.db"
    SQLiteDatabase(target).close()
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli.main", "db", "import", str(big_export), "--db",
                             str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep((0.8, 3.5, 7.0)[attempt])  # the import takes ~9 s here: parsing, validation, the write
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    _integrity(target)
    with SQLiteDatabase(target, readonly=True) as d:
        assert len(d.records()) in (0, COPIES)


def test_a_full_disk_stops_tuning_with_one_line_and_keeps_what_was_committed(capsys, dirs, tuned_db, tmp_path):
    mnt = tmp_path / "small"
    with tmpfs(mnt, "600k"):
        db = mnt / "t.db"
        db.write_bytes(tuned_db.read_bytes())
        filler = mnt / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:  # leave almost nothing free
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        err = refused(capsys, ["tune", "matmul:8,8,9", "--strategy", "random", "--trials", "3", "--db", str(db)])
        assert "full" in err.lower() or "space" in err.lower(), err
        filler.unlink()
        _integrity(db)
        with SQLiteDatabase(db, readonly=True) as d:
            assert len(d.records()) >= 2  # the records that were there before


def test_a_database_that_cannot_be_written_refuses_tuning_and_stays_identical(capsys, tmp_path, tuned_db):
    mnt = tmp_path / "ro"
    with tmpfs(mnt, "4m") as make_readonly:
        db = mnt / "t.db"
        db.write_bytes(tuned_db.read_bytes())
        make_readonly()
        before = digest(db)
        refused(capsys, ["tune", "matmul:8,8,8", "--strategy", "random", "--trials", "1", "--db", str(db)], "not writable")
        refused(capsys, ["db", "import", str(tmp_path / "x.jsonl"), "--db", str(db)])
        assert digest(db) == before
