"""In-memory tuning database for tests and throw-away tuning runs (nothing reaches the disk).

    db = MemoryDatabase()
    tg.tune(wl, db=db)

It is the SQLite implementation on a private ":memory:" connection, so it behaves exactly like the
file database (same uniqueness, ordering and distill rules).
"""

from __future__ import annotations

from tilegraph.tune.database.sqlite_db import SQLiteDatabase


class MemoryDatabase(SQLiteDatabase):
    def __init__(self) -> None:
        super().__init__(":memory:")

    def __repr__(self) -> str:
        return "MemoryDatabase()"
