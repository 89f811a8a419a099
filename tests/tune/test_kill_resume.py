"""SIGKILL a tuning process at random moments: the database stays sound and a rerun resumes."""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tilegraph.tune.database import SQLiteDatabase
from tilegraph.tune.database.record import Record

pytestmark = [pytest.mark.needs_cc, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import json, sys
    import tilegraph as tg
    from tests.tune.helpers import matmul_workload
    from tilegraph.tune import MeasurePolicy
    result = tg.tune(matmul_workload(8), strategy="random", trials=int(sys.argv[2]), db=sys.argv[1], seed=1,
                     progress=False, policy=MeasurePolicy(min_time_s=0.002, min_repeats=3))
    print(json.dumps({"measured": result.measured}))
""")


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out |= {int(x) for x in (task / "children").read_text().split()}
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _count(path: Path) -> int:
    try:
        conn = sqlite3.connect(path, timeout=10)
        try:
            return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:  # not created yet
        return 0


def _wait_for_more_records(proc: subprocess.Popen, path: Path, than: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _count(path) <= than and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)


def _check_db(path: Path) -> list[Record]:
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with SQLiteDatabase(path) as db:
        records = db.records()
    for rec in records:  # no partial record: every field of a committed row is complete
        if rec.ok:
            assert rec.latency_s > 0 and len(rec.samples) >= 3 and rec.policy["num_threads"] >= 1
        else:
            assert rec.message
    return records


def test_sigkill_at_random_moments_never_corrupts_and_rerun_resumes(tmp_path):
    env = {**os.environ, "TILEGRAPH_CACHE_DIR": str(tmp_path / "cache"), "TILEGRAPH_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    db_path = tmp_path / "tuning.db"
    rng = random.Random(7)
    trials = 20
    for attempt in range(8):
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(db_path), str(trials)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if attempt % 2:  # half the kills land mid-measurement, whatever the start-up time on a loaded machine
            _wait_for_more_records(proc, db_path, _count(db_path), timeout_s=120)
            time.sleep(rng.uniform(0.0, 0.5))
        else:
            time.sleep(rng.uniform(0.2, 4.0))
        kids = _children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(k) for k in kids), "workers outlived the killed tuning process"
        if db_path.exists():
            _check_db(db_path)
    before = _check_db(db_path)
    assert before, "no kill happened after a commit; the test did not test resuming"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(db_path), str(trials)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = int(done.stdout.strip().splitlines()[-1].split(":")[1].strip(" }"))
    after = _check_db(db_path)
    assert len(after) == len(before) + measured, "something recorded before was measured again"
    assert {r.trace_hash for r in before} <= {r.trace_hash for r in after}
