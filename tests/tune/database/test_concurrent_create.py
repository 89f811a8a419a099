"""A database opened by one process while another creates it: never "not a tilegraph tuning
database" (the schema version and the tables were read in two snapshots, and the creation could
commit between them), never "database is locked" for the creator (its switch to WAL met the
reader's snapshot)."""

import multiprocessing
import os
import sys

import pytest

from tilegraph.errors import DatabaseError
from tilegraph.tune.database import SQLiteDatabase

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses fork")


def _create(path: str, go, done, errors) -> None:
    go.wait()
    try:
        SQLiteDatabase(path)
    except DatabaseError as e:
        errors.put(f"creator: {e}")
    done.set()


def _open_while_created(path: str, go, done, errors) -> None:
    go.wait()
    while not done.is_set():
        if os.path.exists(path):
            try:
                SQLiteDatabase(path)
            except DatabaseError as e:
                errors.put(f"reader: {e}")
                return


def test_opening_a_database_while_another_process_creates_it(tmp_path):
    ctx = multiprocessing.get_context("fork")
    seen = []
    for n in range(40):  # each round has a window of a few milliseconds: the old code failed 8 in 60
        path = str(tmp_path / f"t{n}.db")
        go, done, errors = ctx.Event(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_create, args=(path, go, done, errors)),
                 ctx.Process(target=_open_while_created, args=(path, go, done, errors))]
        for p in procs:
            p.start()
        go.set()
        for p in procs:
            p.join(60)
        while not errors.empty():
            seen.append(errors.get())
    assert not seen, seen[:3]
