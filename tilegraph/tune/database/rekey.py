"""Workload keys of schema 1 -> keys of schema 2: the computation only, without tags and attrs.

Schema 1 hashed each compute's tag and attrs (the op library's reference metadata) with its
structure, so `ops.matmul` and an equal hand-written `te.compute` had different keys. A schema-1
canonical line reads

    T2:out0:float32[16, 4] = sum((T0[s0, r0] * T1[r0, s1]), axes=[r0:8]) tag=matmul ref_op=matmul,...

and its schema-2 form ends before " tag=". The new key is the hash of the new text (as
`Workload.key` computes it), so a re-keyed record applies exactly where a fresh one would. Records
of several old keys may meet under one new key; a schedule recorded twice then keeps its first
record (the database's (workload, target, trace) uniqueness), others all survive.

    new_entry = rekey_entry(entry)                       # None when the entry is current
    record = rekey_record(record, {old_key: new_key})    # trace's workload_key follows
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

from tilegraph.schedule.trace import canonical_trace_json, trace_hash
from tilegraph.te.workload import key_of_canonical_text
from tilegraph.tune.database.record import Record, WorkloadEntry

_LABELS = " tag="


def current_canonical_text(canonical: str) -> str:
    """The schema-2 canonical text of a schema-1 (or already current) one."""
    return "\n".join(line.split(_LABELS, 1)[0] for line in canonical.split("\n"))


def rekey_entry(entry: WorkloadEntry) -> WorkloadEntry | None:
    """The entry under its current key, or None when it already has it."""
    canonical = current_canonical_text(entry.canonical)
    key = key_of_canonical_text(canonical)
    if key == entry.key and canonical == entry.canonical:
        return None
    return replace(entry, key=key, canonical=canonical)


def rekey_trace_json(trace_json: str, new_key: str) -> str:
    """The stored trace text with its workload key replaced (names and instructions unchanged)."""
    d = json.loads(trace_json)
    d["workload_key"] = new_key
    return canonical_trace_json(json.dumps(d), keep_names=True)


def rekey_record(record: Record, new_keys: dict[str, str]) -> Record:
    """`record` under the new key of its workload (unchanged when its key is not in `new_keys`)."""
    new_key = new_keys.get(record.workload_key)
    if new_key is None:
        return record
    try:
        trace_json = rekey_trace_json(record.trace_json, new_key)
    except (TypeError, ValueError, RecursionError):
        trace_json = record.trace_json  # unreadable: validation refuses it, naming the trace
    return replace(record, workload_key=new_key, trace_json=trace_json)


def migrate_sqlite_v2(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2 inside the caller's transaction: re-key workloads, records and their traces."""
    rows = conn.execute("SELECT key, canonical, op_name, shapes FROM workloads").fetchall()
    for key, canonical, op_name, shapes in rows:
        new = rekey_entry(WorkloadEntry(key, canonical, op_name, {}))
        if new is None:
            continue
        conn.execute("DELETE FROM workloads WHERE key = ?", (key,))
        conn.execute("INSERT OR IGNORE INTO workloads (key, canonical, op_name, shapes) VALUES (?, ?, ?, ?)",
                     (new.key, new.canonical, op_name, shapes))
        records = conn.execute("SELECT id, trace_json FROM records WHERE workload_key = ?", (key,)).fetchall()
        for record_id, trace_json in records:
            try:
                new_trace = rekey_trace_json(trace_json, new.key)
            except (TypeError, ValueError, RecursionError):
                new_trace = trace_json  # an unreadable trace was never applied; it keeps its text
            conn.execute("UPDATE OR IGNORE records SET workload_key = ?, trace_json = ?, trace_hash = ? WHERE id = ?",
                         (new.key, new_trace, trace_hash(new_trace), record_id))
        # what is left under the old key duplicated a schedule already stored under the new key
        conn.execute("DELETE FROM records WHERE workload_key = ?", (key,))
