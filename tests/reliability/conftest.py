"""Fixtures for the bad-input catalogue: private folders, a small real database, a CLI runner
that checks the contract (exit code 2, one line on stderr, no traceback)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tilegraph.cli.main import main
from tilegraph.tune.database import SQLiteDatabase


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture(scope="session")
def tuned_db(tmp_path_factory) -> Path:
    """A real database: two measured records of matmul:8,8,8 (tuned once per session)."""
    root = tmp_path_factory.mktemp("tuned")
    old = {k: os.environ.get(k) for k in ("TILEGRAPH_CACHE_DIR", "TILEGRAPH_DATA_DIR")}
    os.environ["TILEGRAPH_CACHE_DIR"] = str(root / "cache")
    os.environ["TILEGRAPH_DATA_DIR"] = str(root / "data")
    try:
        path = root / "tuned.db"
        assert main(["tune", "matmul:8,8,8", "--strategy", "random", "--trials", "2", "--db", str(path), "--json"]) == 0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    with SQLiteDatabase(path) as db:  # fold the WAL into the file so a copy is the whole database
        db._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture
def db_copy(tuned_db, tmp_path) -> Path:
    dst = tmp_path / "t.db"
    shutil.copy(tuned_db, dst)
    return dst


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(capsys, argv: list[str], fragment: str = "") -> str:
    """Run the CLI in-process; assert the contract; return the error line."""
    capsys.readouterr()
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("tilegraph: error: "), err
    assert "Traceback" not in err and len(err) < 400, err
    assert fragment.lower() in err.lower(), (fragment, err)
    return err


def refused_in_subprocess(argv: list[str], fragment: str = "", timeout: float = 120, env=None) -> str:
    """The console script in a fresh process: exit code 2, one line, no signal, no traceback."""
    import sys

    proc = subprocess.run([sys.executable, "-m", "tilegraph.cli.main", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert fragment.lower() in proc.stderr.lower(), (fragment, proc.stderr)
    return proc.stderr


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Callable[[], None]]:
    """A fresh tmpfs of `size` mounted at `folder` (created) for the block; yields a function that
    remounts it read-only. Skips the test where mounting is not permitted (not root): chmod does
    not stop root, so a small or read-only filesystem is the only honest way to test these faults."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs (a full or read-only filesystem)")
    folder.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]).returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")

    def make_readonly() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)

    try:
        yield make_readonly
    finally:
        subprocess.run(["umount", "-l", str(folder)])
