"""SQLite tuning database: one file, WAL mode, one transaction per record.

    db = SQLiteDatabase()                      # data_dir()/tuning.db
    db = SQLiteDatabase("my.db")
    db.commit_record(rec)                      # durable when it returns; a kill loses nothing committed

The schema version lives in `PRAGMA user_version`; `migrations` lists the versions applied.
A file that is not a tilegraph database, or one of an unknown schema version, raises DatabaseError.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tilegraph.config import data_dir
from tilegraph.errors import DatabaseError, shorten
from tilegraph.schedule.trace import canonical_trace_json, trace_hash
from tilegraph.te.workload import Workload
from tilegraph.tune.database.base import Database
from tilegraph.tune.database.record import Record, WorkloadEntry
from tilegraph.tune.database.rekey import migrate_sqlite_v2

SCHEMA_VERSION = 2

_SCHEMA_V1 = """
CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL);
CREATE TABLE workloads (
    key TEXT PRIMARY KEY,
    canonical TEXT NOT NULL,
    op_name TEXT NOT NULL,
    shapes TEXT NOT NULL
);
CREATE TABLE records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workload_key TEXT NOT NULL,
    target_fingerprint TEXT NOT NULL,
    trace_json TEXT NOT NULL,
    trace_hash TEXT NOT NULL,
    kind TEXT NOT NULL,
    latency_s REAL,
    latency_min_s REAL,
    latency_max_s REAL,
    spread REAL,
    samples TEXT NOT NULL,
    policy TEXT NOT NULL,
    message TEXT NOT NULL,
    meta TEXT NOT NULL,
    version TEXT NOT NULL,
    created REAL NOT NULL,
    UNIQUE (workload_key, target_fingerprint, trace_hash)
);
CREATE INDEX records_best ON records (workload_key, target_fingerprint, kind, latency_s);
"""

# version -> what takes a database at version-1 to version: an SQL script or a function of the
# connection, run inside the migration's transaction. 2: workload keys of the computation only.
MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {1: _SCHEMA_V1, 2: migrate_sqlite_v2}

_COLUMNS = ("workload_key", "target_fingerprint", "trace_json", "trace_hash", "kind", "latency_s", "latency_min_s",
            "latency_max_s", "spread", "samples", "policy", "message", "meta", "version", "created")


_INSERT_RECORD = f"INSERT OR IGNORE INTO records ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


def _workload_row(entry: WorkloadEntry) -> tuple[Any, ...]:
    return entry.key, entry.canonical, entry.op_name, json.dumps(entry.shapes, sort_keys=True)


def _record_row(record: Record) -> tuple[Any, ...]:
    stored_trace = canonical_trace_json(record.trace_json, keep_names=True)
    return (record.workload_key, record.target_fingerprint, stored_trace, record.trace_hash,
            record.kind, record.latency_s, record.latency_min_s, record.latency_max_s, record.spread,
            json.dumps(list(record.samples)), json.dumps(record.policy, sort_keys=True), record.message,
            json.dumps(record.meta, sort_keys=True, default=str), record.version, record.created)


def default_path() -> Path:
    return data_dir() / "tuning.db"


SQLITE_HEADER = b"SQLite format 3\x00"


def _set_wal(conn: sqlite3.Connection, timeout_s: float = 30.0) -> None:
    """Switch to WAL. The switch needs the file to itself and SQLite answers "locked" at once (no busy
    wait) while another process reads it, e.g. one opening the database this process is creating."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _schema_state(conn: sqlite3.Connection) -> tuple[int, set[str]]:
    """The schema version and the tables, read in one transaction: read one after the other, another
    process's creation of the database could commit between them (tables, but version 0: "not a
    tilegraph database")."""
    conn.execute("BEGIN")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.execute("COMMIT")
    return version, tables


class SQLiteDatabase(Database):
    """`readonly=True` opens without ever writing to the file (works on a read-only filesystem);
    `create=False` refuses a path where no database exists yet."""

    def __init__(self, path: str | Path | None = None, create: bool = True, readonly: bool = False):
        self.path = str(path) if path is not None else str(default_path())
        self.readonly = readonly
        self._conn = self._open(create and not readonly)

    # ------------------------------------------------------------------ opening
    def _open(self, create: bool) -> sqlite3.Connection:
        """Identify the file before anything can write to it: a file that is not ours is refused
        unchanged (no WAL switch, no schema, no journal beside it); a corrupt one is refused."""
        if self.path == ":memory:":
            conn = sqlite3.connect(":memory:", isolation_level=None)
            self._migrate(conn, 0, set())
            return conn
        p = Path(self.path)
        exists = p.exists()
        if exists and not p.is_file():
            raise DatabaseError(f"tuning database path {shorten(self.path, 120)} is not a regular file")
        if not exists or p.stat().st_size == 0:
            if not create:
                state = "is empty" if exists else "does not exist"
                raise DatabaseError(f"tuning database {shorten(self.path, 120)} {state}")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(f"cannot create the folder of tuning database {shorten(self.path, 120)}: "
                                    f"{e.strerror or e}") from None
        else:
            self._identify(p)
        try:
            if self.readonly:
                conn = self._connect_readonly(p)
            else:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.execute("PRAGMA busy_timeout = 30000")
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open tuning database {shorten(self.path, 120)}: {e}") from None
        try:
            version, tables = _schema_state(conn)
            if self.readonly:
                self._check_schema(version, tables)
                if version < SCHEMA_VERSION:
                    # an older file read without writing to it: migrate a copy held in memory
                    copy = sqlite3.connect(":memory:", isolation_level=None)
                    conn.backup(copy)
                    conn.close()
                    conn = copy
                    self._migrate(conn, version, tables)
            else:
                _set_wal(conn)
                conn.execute("PRAGMA synchronous = NORMAL")
                self._migrate(conn, version, tables)
        except sqlite3.DatabaseError as e:
            conn.close()
            raise self._error(e) from None
        except DatabaseError:
            conn.close()
            raise
        return conn

    def _identify(self, p: Path) -> None:
        """Refuse, without writing, a file that is not an intact tilegraph database."""
        try:
            with open(p, "rb") as f:
                header = f.read(len(SQLITE_HEADER))
        except OSError as e:
            raise DatabaseError(f"cannot read tuning database {shorten(self.path, 120)}: {e.strerror or e}") from None
        if header != SQLITE_HEADER:
            raise DatabaseError(f"{shorten(self.path, 120)} is not a tilegraph tuning database (not an SQLite file)")
        try:
            conn = self._connect_readonly(p)
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open tuning database {shorten(self.path, 120)}: {e}") from None
        try:
            version, tables = _schema_state(conn)
            self._check_schema(version, tables)
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
            if problems != ["ok"]:
                raise DatabaseError(f"tuning database {shorten(self.path, 120)} is corrupt ({'; '.join(problems)[:200]}); "
                                    f"restore it from a copy or an export")
        except sqlite3.DatabaseError as e:
            raise self._error(e) from None
        finally:
            conn.close()

    def _connect_readonly(self, p: Path) -> sqlite3.Connection:
        """A connection that never writes to the file. A WAL database in a read-only folder cannot
        create its shared-memory file, so that case is read as immutable."""
        uri = p.resolve().as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.OperationalError:
            conn.close()
            conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None)
        conn.execute("PRAGMA query_only = 1")
        return conn

    def _error(self, e: sqlite3.Error) -> DatabaseError:
        text = str(e)
        if "not a database" in text:
            return DatabaseError(f"{shorten(self.path, 120)} is not a tilegraph tuning database (not SQLite or corrupt)")
        if "malformed" in text or "corrupt" in text:
            return DatabaseError(f"tuning database {shorten(self.path, 120)} is corrupt ({text}); restore it from a copy "
                                 f"or an export")
        if "readonly" in text or "unable to open" in text:
            return DatabaseError(f"tuning database {shorten(self.path, 120)} is not writable: {text}")
        return DatabaseError(f"cannot use tuning database {shorten(self.path, 120)}: {text}")

    def _check_schema(self, version: int, tables: set[str]) -> None:
        if version > SCHEMA_VERSION:
            raise DatabaseError(f"tuning database {shorten(self.path, 120)} has schema version {version}; this tilegraph "
                                f"reads up to {SCHEMA_VERSION} (upgrade tilegraph)")
        if version == 0 and tables:
            raise DatabaseError(f"{shorten(self.path, 120)} is an SQLite file but not a tilegraph tuning database "
                                f"(tables: {sorted(tables)[:5]})")
        if version > 0 and not {"workloads", "records", "migrations"} <= tables:
            raise DatabaseError(f"tuning database {shorten(self.path, 120)} claims schema version {version} but lacks its tables")

    def _migrate(self, conn: sqlite3.Connection, version: int, tables: set[str]) -> None:
        self._check_schema(version, tables)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = conn.execute("PRAGMA user_version").fetchone()[0]
                if current < target:  # another process may have migrated while we waited for the lock
                    step = MIGRATIONS[target]
                    if callable(step):
                        step(conn)
                    else:
                        for statement in step.split(";"):
                            if statement.strip():
                                conn.execute(statement)
                    conn.execute("INSERT INTO migrations VALUES (?, ?)", (target, time.time()))
                    conn.execute(f"PRAGMA user_version = {int(target)}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        try:
            return fn(self._conn)
        except sqlite3.Error as e:
            raise self._error(e) from None
        except (ValueError, OverflowError) as e:  # a value SQLite cannot store, or a corrupt JSON column
            raise DatabaseError(f"tuning database {shorten(self.path, 120)}: {e}") from None

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        if self.readonly:
            raise DatabaseError(f"tuning database {shorten(self.path, 120)} was opened read-only")

        def tx(conn: sqlite3.Connection) -> Any:
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return out

        return self._run(tx)

    # ------------------------------------------------------------------ writing
    def commit_workload(self, workload: Workload | WorkloadEntry) -> None:
        entry = workload if isinstance(workload, WorkloadEntry) else WorkloadEntry.of(workload)
        self._write(lambda c: c.execute(
            "INSERT OR IGNORE INTO workloads (key, canonical, op_name, shapes) VALUES (?, ?, ?, ?)", _workload_row(entry)))

    def commit_record(self, record: Record) -> bool:
        return bool(self._write(lambda c: c.execute(_INSERT_RECORD, _record_row(record)).rowcount))

    def replace_record(self, record: Record) -> None:
        self._write(lambda c: c.execute(_INSERT_RECORD.replace("OR IGNORE", "OR REPLACE", 1), _record_row(record)))

    def commit_batch(self, workloads: list[WorkloadEntry], records: list[Record]) -> int:
        """All in one transaction: an interrupted import or merge adds nothing."""
        def fn(c: sqlite3.Connection) -> int:
            for w in workloads:
                c.execute("INSERT OR IGNORE INTO workloads (key, canonical, op_name, shapes) VALUES (?, ?, ?, ?)",
                          _workload_row(w))
            return sum(c.execute(_INSERT_RECORD, _record_row(r)).rowcount for r in records)

        return self._write(fn)

    def delete_records(self, keep_ids: set[int], workload_key: str, target_fingerprint: str) -> int:
        def fn(c: sqlite3.Connection) -> int:
            ids = [r[0] for r in c.execute("SELECT id FROM records WHERE workload_key = ? AND target_fingerprint = ?",
                                           (workload_key, target_fingerprint)) if r[0] not in keep_ids]
            c.executemany("DELETE FROM records WHERE id = ?", [(i,) for i in ids])
            return len(ids)

        return self._write(fn)

    def merge(self, other_path: str | Path) -> int:
        """Add every record of another SQLite tuning database (opened read-only); returns how many were new."""
        if self._is_own_file(Path(other_path)):
            raise DatabaseError(f"refusing to merge {other_path} into itself")
        with SQLiteDatabase(other_path, create=False, readonly=True) as other:
            return self.merge_from(other)

    # ------------------------------------------------------------------ reading
    def workloads(self) -> list[WorkloadEntry]:
        rows = self._run(lambda c: c.execute("SELECT key, canonical, op_name, shapes FROM workloads ORDER BY op_name, key")
                         .fetchall())
        return [WorkloadEntry(k, can, op, json.loads(shapes)) for k, can, op, shapes in rows]

    def _iter_records(self, workload_key: str | None, target_fingerprint: str | None,
                      kind: str | None) -> Iterator[tuple[int, Record]]:
        where, args = [], []
        for column, value in (("workload_key", workload_key), ("target_fingerprint", target_fingerprint), ("kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = f"SELECT id, {', '.join(_COLUMNS)} FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._run(lambda c: c.execute(sql + " ORDER BY id", args).fetchall())
        for row in rows:
            d = dict(zip(("id", *_COLUMNS), row))
            d["samples"] = json.loads(d["samples"])
            d["policy"] = json.loads(d["policy"])
            d["meta"] = json.loads(d["meta"])
            yield d["id"], Record.from_dict(d)

    def measured_hashes(self, workload_key: str, target_fingerprint: str) -> set[str]:
        rows = self._run(lambda c: c.execute(
            "SELECT trace_hash FROM records WHERE workload_key = ? AND target_fingerprint = ?",
            (workload_key, target_fingerprint)).fetchall())
        return {r[0] for r in rows}

    def record(self, workload_key: str, target_fingerprint: str, trace_json: str) -> Record | None:
        h = trace_hash(trace_json)
        rows = self._run(lambda c: c.execute(
            "SELECT id FROM records WHERE workload_key = ? AND target_fingerprint = ? AND trace_hash = ?",
            (workload_key, target_fingerprint, h)).fetchall())
        if not rows:
            return None
        return next((r for rid, r in self._iter_records(workload_key, target_fingerprint, None) if rid == rows[0][0]),
                    None)

    def best(self, workload_key: str, target_fingerprint: str) -> Record | None:
        rows = self._run(lambda c: c.execute(
            "SELECT id FROM records WHERE workload_key = ? AND target_fingerprint = ? AND kind = 'ok' "
            "ORDER BY latency_s, created LIMIT 1", (workload_key, target_fingerprint)).fetchall())
        if not rows:
            return None
        return next(r for rid, r in self._iter_records(workload_key, target_fingerprint, "ok") if rid == rows[0][0])

    def files(self) -> list[Path]:
        if self.path == ":memory:":
            return []
        own = Path(self.path)
        return [own, *(own.with_name(own.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]

    def integrity_ok(self) -> bool:
        return self._run(lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SQLiteDatabase({self.path!r})"
