"""What a record must satisfy before it is written by an import or a merge.

    check_record(record, known_workload_keys)     # ValueError naming the first problem

A database only ever holds records this tilegraph could have written itself: a known result
kind; finite, positive latencies below MAX_LATENCY_S; finite samples; a trace that parses, names
the record's own workload and uses only known instructions with integer arguments in range. A
trace can be replayed only where its Workload is at hand, so replay is checked where records are
applied (tune/apply.py skips one that no longer replays, and says so).
"""

from __future__ import annotations

import math
from typing import Any

from tilegraph.errors import ScheduleError, shorten
from tilegraph.schedule.primitives import PRIMITIVES
from tilegraph.schedule.trace import BUILT_KERNEL, Trace
from tilegraph.tune.database.record import Record

MAX_LATENCY_S = 1e5
MAX_TRACE_CHARS = 1 << 20
MAX_SAMPLES = 100_000
SAMPLING_KINDS = ("sample_tile", "sample_categorical")
_INT_LIMIT = 2**31 - 1


def check_record(record: Record, known_workload_keys: set[str]) -> None:
    """Raise ValueError when the record is not one tilegraph could have measured."""
    if record.workload_key not in known_workload_keys:
        raise ValueError(f"record for workload {shorten(record.workload_key)} comes without that workload")
    _check_latency("latency_s", record.latency_s, required=record.ok)
    _check_latency("latency_min_s", record.latency_min_s)
    _check_latency("latency_max_s", record.latency_max_s)
    if record.spread is not None and not (_is_real(record.spread) and 0 <= record.spread < MAX_LATENCY_S):
        raise ValueError(f"spread must be a finite non-negative number, got {shorten(record.spread)}")
    if len(record.samples) > MAX_SAMPLES:
        raise ValueError(f"{len(record.samples)} samples (at most {MAX_SAMPLES})")
    for s in record.samples:
        _check_latency("a sample", s, required=True)
    if not (_is_real(record.created) and math.isfinite(record.created)):
        raise ValueError(f"created must be a finite timestamp, got {shorten(record.created)}")
    _check_trace(record)


def _check_latency(name: str, value: Any, required: bool = False) -> None:
    if value is None and not required:
        return
    if not _is_real(value) or not (0 < value < MAX_LATENCY_S):
        raise ValueError(f"{name} must be a number of seconds in (0, {MAX_LATENCY_S:g}), got {shorten(value)}")


def _check_trace(record: Record) -> None:
    if len(record.trace_json) > MAX_TRACE_CHARS:
        raise ValueError(f"trace of {len(record.trace_json)} characters (at most {MAX_TRACE_CHARS})")
    try:
        trace = Trace.from_json(record.trace_json)
    except ScheduleError as e:
        raise ValueError(f"bad trace: {e}") from None
    if trace.workload_key != record.workload_key:
        raise ValueError(f"the trace names workload {shorten(trace.workload_key)}, the record {shorten(record.workload_key)}")
    for n, inst in enumerate(trace.instructions):
        if inst.kind not in PRIMITIVES and inst.kind not in SAMPLING_KINDS and inst.kind != BUILT_KERNEL:
            raise ValueError(f"trace instruction {n} is the unknown primitive {shorten(inst.kind)}")
        _check_ints(f"trace instruction {n} ({inst.kind})", inst.inputs)
        _check_ints(f"trace instruction {n} ({inst.kind})", inst.decision)
        factors = inst.decision if inst.kind == "sample_tile" else inst.inputs.get("factors")
        if isinstance(factors, list) and any(isinstance(f, int) and f <= 0 for f in factors):
            raise ValueError(f"trace instruction {n} ({inst.kind}) has a factor that is not positive: {shorten(factors)}")


def _check_ints(where: str, value: Any) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if abs(value) > _INT_LIMIT:
            raise ValueError(f"{where} has the integer {shorten(value)}, beyond 32 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} has the number {value!r}")
    elif isinstance(value, dict):
        for v in value.values():
            _check_ints(where, v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_ints(where, v)
    elif not isinstance(value, str):
        raise ValueError(f"{where} has a value of type {type(value).__name__}")


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
