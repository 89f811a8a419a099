"""Tuning databases: every measurement, keyed by (workload, target fingerprint, trace)."""

from __future__ import annotations

from pathlib import Path

from tilegraph.tune.database.base import Database
from tilegraph.tune.database.memory_db import MemoryDatabase
from tilegraph.tune.database.record import Record, WorkloadEntry, built_kernels_fingerprint
from tilegraph.tune.database.sqlite_db import SCHEMA_VERSION, SQLiteDatabase, default_path


def open_database(db: Database | str | Path | None = None, readonly: bool = False) -> Database:
    """A Database: the one given, the SQLite file at a path, or the default file when None.
    `readonly` opens a file without writing to it (an absent file is then an error)."""
    if isinstance(db, Database):
        return db
    if db is None or isinstance(db, (str, Path)):
        return SQLiteDatabase(db, readonly=readonly)
    raise TypeError(f"db must be a Database, a path or None, got {type(db).__name__}")


__all__ = ["Database", "MemoryDatabase", "Record", "SQLiteDatabase", "WorkloadEntry", "SCHEMA_VERSION",
           "built_kernels_fingerprint", "default_path", "open_database"]
