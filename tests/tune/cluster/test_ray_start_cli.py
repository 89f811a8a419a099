"""A cluster started as a user starts one: `ray start --head` and `ray start --address` for a second
node on this machine (each its own raylet, workers and resources). A workload tunes over it while
the second node's processes are killed mid-run; nothing is lost or recorded twice."""

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

import pytest

import tilegraph as tg
from tests.tune.helpers import matmul_workload
from tilegraph.tune import MeasurePolicy
from tilegraph.tune.database import SQLiteDatabase

pytest.importorskip("ray", reason="Ray is an extra (tilegraph[ray])")
pytestmark = [pytest.mark.needs_cc, pytest.mark.needs_ray, pytest.mark.extended,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the nodes' processes in /proc")]

FAST = MeasurePolicy(min_time_s=0.002, min_repeats=3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process here."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            found[int(entry)] = (parent, command)
    return found


def _kill_with_descendants(marks: list[str]) -> int:
    """SIGKILL every process whose command line has one of `marks`, and all their descendants
    (Ray's workers rename themselves, so they are found by parent)."""
    table = _processes()
    doomed = {pid for pid, (_, command) in table.items() if any(m in command for m in marks)} - {os.getpid()}
    grown = True
    while grown:
        children = {pid for pid, (parent, _) in table.items() if parent in doomed} - doomed - {os.getpid()}
        grown = bool(children)
        doomed |= children
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(doomed)


@pytest.fixture
def ray_start_cluster(tmp_path, monkeypatch):
    """`ray start --head` and a second node, one CPU each, on free ports; yields (address, the
    second node's marker for its raylet); kills every process of the cluster at the end."""
    if shutil.which("ray") is None:
        pytest.skip("the `ray` command is not on PATH")
    temp = tempfile.mkdtemp(prefix="tgray", dir="/tmp")  # short: Ray's socket paths live under it
    for key, value in (("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache")), ("TILEGRAPH_DATA_DIR", str(tmp_path / "data")),
                       ("RAY_AUTH_MODE", "disabled")):  # the nodes inherit these (no token between them here)
        monkeypatch.setenv(key, value)
    port, client_port, second = _free_port(), _free_port(), _free_port()
    marks = [temp, f"--port={client_port}"]
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats"]
    try:
        for command in (["ray", "start", "--head", "--port", str(port), "--ray-client-server-port", str(client_port),
                         "--include-dashboard", "false", "--temp-dir", temp, *common],
                        ["ray", "start", "--address", f"127.0.0.1:{port}", "--node-manager-port", str(second), *common]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip().splitlines()[-1:]
                pytest.skip(f"`{' '.join(command[:3])}` could not start a node here: {tail}")
        yield f"127.0.0.1:{port}", f"--node_manager_port={second}"
    finally:
        import ray

        ray.shutdown()
        _kill_with_descendants(marks)
        shutil.rmtree(temp, ignore_errors=True)


def _count(path) -> int:
    """Records so far, read while the tuner writes (plain SQLite: the schema may be half made)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            return con.execute("SELECT count(*) FROM records").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_node_started_with_ray_start_killed_mid_run_loses_nothing(ray_start_cluster, tmp_path):
    address, second_raylet = ray_start_cluster
    wl = matmul_workload(8)
    db = tmp_path / "t.db"
    killed: list[int] = []

    def kill_when_measuring() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            if _count(db) >= 2:
                killed.append(_kill_with_descendants([second_raylet]))
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_measuring)
    killer.start()
    try:
        result = tg.tune(wl, strategy="random", trials=16, db=str(db), seed=3, progress=False, policy=FAST,
                         cluster=address)
    finally:
        killer.join()
    assert killed and killed[0] >= 1  # the raylet and its workers
    records = list(SQLiteDatabase(db).records(wl.key, tg.Target("cpu").fingerprint))
    assert result.measured == 16 and len(records) == 16
    assert len({r.trace_json for r in records}) == 16
    assert Counter(r.kind for r in records)["ok"] == 16
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
