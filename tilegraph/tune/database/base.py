"""The tuning database protocol: every measurement is kept, keyed by workload, target and trace.

    db.commit_workload(wl)
    db.commit_record(Record(wl.key, target.fingerprint, trace_json, "ok", latency_s=1e-4, ...))
    db.has_record(wl.key, target.fingerprint, trace_json)     # resume: measured already?
    db.best(wl.key, target.fingerprint)                        # fastest "ok" record, or None
    db.export_jsonl(path); other.import_jsonl(path); db.merge("other.db"); db.distill()

Lookups always name the target fingerprint, so a record measured elsewhere is a miss.
"""

from __future__ import annotations

import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tilegraph.errors import DatabaseError, ScheduleError
from tilegraph.schedule.schedule import Schedule
from tilegraph.schedule.trace import trace_hash
from tilegraph.te.workload import Workload
from tilegraph.tune.database.record import Record, WorkloadEntry
from tilegraph.tune.database.rekey import rekey_entry, rekey_record
from tilegraph.tune.database.validate import check_record
from tilegraph.tune.measure import resolve_target

log = logging.getLogger("tilegraph.tune")


class Database(ABC):
    # ------------------------------------------------------------------ writing
    @abstractmethod
    def commit_workload(self, workload: Workload | WorkloadEntry) -> None:
        """Store the workload's key, canonical text and shapes (idempotent)."""

    @abstractmethod
    def commit_record(self, record: Record) -> bool:
        """Store one measurement in its own transaction; False when that exact trace was recorded already."""

    @abstractmethod
    def replace_record(self, record: Record) -> None:
        """Store one measurement in its own transaction, in place of any record of the same trace
        (a re-measurement: the old record and the new never both exist, and one is always there)."""

    @abstractmethod
    def delete_records(self, keep_ids: set[int], workload_key: str, target_fingerprint: str) -> int:
        """Remove every record of (workload, target) whose id is not in keep_ids; returns how many."""

    # ------------------------------------------------------------------ reading
    @abstractmethod
    def workloads(self) -> list[WorkloadEntry]: ...

    @abstractmethod
    def _iter_records(self, workload_key: str | None, target_fingerprint: str | None,
                      kind: str | None) -> Iterator[tuple[int, Record]]: ...

    @abstractmethod
    def measured_hashes(self, workload_key: str, target_fingerprint: str) -> set[str]:
        """trace hashes already recorded (any kind) for this workload on this target."""

    def records(self, workload_key: str | None = None, target_fingerprint: str | None = None,
                kind: str | None = None) -> list[Record]:
        return [r for _, r in self._iter_records(workload_key, target_fingerprint, kind)]

    def record(self, workload_key: str, target_fingerprint: str, trace_json: str) -> Record | None:
        """The record of this exact trace (any kind), or None."""
        h = trace_hash(trace_json)
        return next((r for r in self.records(workload_key, target_fingerprint) if r.trace_hash == h), None)

    def has_record(self, workload_key: str, target_fingerprint: str, trace_json: str) -> bool:
        return trace_hash(trace_json) in self.measured_hashes(workload_key, target_fingerprint)

    def top_k(self, workload_key: str, target_fingerprint: str, k: int) -> list[Record]:
        """The k fastest "ok" records (median latency), fastest first."""
        ok = self.records(workload_key, target_fingerprint, kind="ok")
        return sorted(ok, key=lambda r: (r.latency_s, r.created))[: max(k, 0)]

    def best(self, workload_key: str, target_fingerprint: str) -> Record | None:
        top = self.top_k(workload_key, target_fingerprint, 1)
        return top[0] if top else None

    def workload(self, key: str) -> WorkloadEntry | None:
        return next((w for w in self.workloads() if w.key == key), None)

    def best_schedule(self, workload: Workload, target: Any = "cpu") -> Schedule | None:
        """The Schedule of the best record on `target` that replays, or None; what tg.build(wl, db=...)
        asks for. Up to MAX_RECORDS_TRIED records are tried (an imported or stale record may no
        longer replay); a miss is reported once per workload and target, as a plain message. A
        workload with constant inputs that has no record of its own takes its plain workload's (the
        same computation timed with the packing inside: a schedule tuned with `tilegraph tune` on
        the operator serves the model)."""
        fp = str(resolve_target(target).fingerprint)
        failures = []
        for key in dict.fromkeys((workload.key, workload.plain.key)):
            for record in self.top_k(key, fp, MAX_RECORDS_TRIED):
                try:
                    return Schedule.replay(workload, record.trace_json)
                except ScheduleError as e:
                    failures.append(str(e))
        why = f"its best records do not replay ({failures[0][:200]})" if failures else "no tuning record for this target"
        report_miss(workload, fp, why)
        return None

    # ------------------------------------------------------------------ maintenance
    def distill(self) -> int:
        """Keep only the best "ok" record per (workload, target); returns how many records were removed."""
        groups: dict[tuple[str, str], list[tuple[int, Record]]] = {}
        for rid, rec in self._iter_records(None, None, None):
            groups.setdefault((rec.workload_key, rec.target_fingerprint), []).append((rid, rec))
        removed = 0
        for (wk, fp), items in groups.items():
            ok = [(rid, r) for rid, r in items if r.ok]
            keep = {min(ok, key=lambda x: (x[1].latency_s, x[1].created))[0]} if ok else set()
            removed += self.delete_records(keep, wk, fp)
        return removed

    def export_jsonl(self, path: str | Path) -> int:
        """One JSON object per line: workloads first ({"workload": ...}), then records ({"record": ...}).
        Written to a temporary file beside `path` and renamed, so a failure (a full disk) leaves no
        partial export; the database's own files are never an export target."""
        target = Path(path)
        if self._is_own_file(target):
            raise DatabaseError(f"refusing to export into {path}: it is this tuning database's own file")
        workloads, records = self.workloads(), self.records()
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                for w in workloads:
                    f.write(json.dumps({"workload": w.to_dict()}, sort_keys=True) + "\n")
                for rec in records:
                    f.write(json.dumps({"record": rec.to_dict()}, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise DatabaseError(f"cannot write {path}: {e.strerror or e}") from None
        return len(records)

    def import_jsonl(self, path: str | Path) -> int:
        """Add the records of an export; existing (workload, target, trace) records are kept. Every
        line is parsed and validated (tune/database/validate.py) before anything is written, and all
        are written in one transaction: a file with one bad line adds nothing. Returns how many
        records were new."""
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise DatabaseError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
        workloads: list[WorkloadEntry] = []
        records: list[tuple[int, Record]] = []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("expected a JSON object")
                if "workload" in obj:
                    workloads.append(WorkloadEntry.from_dict(obj["workload"]))
                elif "record" in obj:
                    records.append((lineno, Record.from_dict(obj["record"])))
                else:
                    raise ValueError("expected a 'workload' or 'record' object")
            except RecursionError:
                raise DatabaseError(f"{path}:{lineno}: not a tuning record: JSON nested too deeply") from None
            except (TypeError, ValueError, OverflowError) as e:
                raise DatabaseError(f"{path}:{lineno}: not a tuning record: {str(e)[:200]}") from None
        workloads, records = _current_keys(workloads, records)
        self._validate(workloads, records, lambda n: f"{path}:{n}")
        return self.commit_batch(workloads, [r for _, r in records])

    def merge_from(self, other: Database) -> int:
        """Add every record of another database, validated like an import and written atomically."""
        workloads = other.workloads()
        records = list(enumerate(other.records(), 1))
        self._validate(workloads, records, lambda n: f"record {n} of {other!r}")
        return self.commit_batch(workloads, [r for _, r in records])

    def _validate(self, workloads: list[WorkloadEntry], records: list[tuple[int, Record]],
                          where: Callable[[int], str]) -> None:
        known = {w.key for w in workloads} | {w.key for w in self.workloads()}
        for n, rec in records:
            try:
                check_record(rec, known)
            except ValueError as e:
                raise DatabaseError(f"{where(n)}: refused (nothing was added): {e}") from None

    def commit_batch(self, workloads: list[WorkloadEntry], records: list[Record]) -> int:
        """Store workloads and records; returns how many records were new. Implementations that can
        should do it in one transaction (SQLiteDatabase does)."""
        for w in workloads:
            self.commit_workload(w)
        return sum(bool(self.commit_record(r)) for r in records)

    def files(self) -> list[Path]:
        """The files this database lives in (none for an in-memory one); never an export target."""
        return []

    def _is_own_file(self, path: Path) -> bool:
        for own in self.files():
            try:
                if path.resolve() == own.resolve() or (path.exists() and own.exists() and os.path.samefile(path, own)):
                    return True
            except OSError:
                continue
        return False

    @abstractmethod
    def close(self) -> None:
        """Release the connection or other resources."""

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _current_keys(workloads: list[WorkloadEntry],
                  records: list[tuple[int, Record]]) -> tuple[list[WorkloadEntry], list[tuple[int, Record]]]:
    """Entries and records of an export written by an older schema, under today's workload keys."""
    new_keys: dict[str, str] = {}
    current = []
    for w in workloads:
        new = rekey_entry(w)
        if new is not None:
            new_keys[w.key] = new.key
        current.append(new or w)
    if not new_keys:
        return workloads, records
    return current, [(n, rekey_record(r, new_keys)) for n, r in records]


MAX_RECORDS_TRIED = 8
_reported: set[tuple[str, str]] = set()


def report_miss(workload: Workload, fp: str, why: str) -> None:
    """Say once per (workload, target) that the default schedule is used, and why."""
    if (workload.key, fp) in _reported:
        return
    _reported.add((workload.key, fp))
    log.info("%s (%s): %s; using the default schedule. Run `tilegraph tune` to tune it.", workload.op_name,
             workload.key, why)
