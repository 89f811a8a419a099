"""The values a tuning database stores: one WorkloadEntry per workload, one Record per measurement.

A Record is keyed by (workload_key, target_fingerprint, trace_hash): the same schedule measured on
another machine or toolchain is another record, and is never applied here.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from tilegraph.schedule.trace import trace_hash
from tilegraph.te.workload import Workload
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.result import RESULT_KINDS, RunResult
from tilegraph.version import __version__

BUILT_KERNELS = "+built-kernels"


def built_kernels_fingerprint(target_fingerprint: str) -> str:
    """The fingerprint under which measurements of kernels built outside a schedule (the model
    compiler's fused kernels, TuneSession.measure_kernel) are kept: the target's, marked. They sit
    beside the target's schedule records, never among them: tg.tune, the strategies, the task
    scheduler and best_schedule read a target's records as schedules to replay and learn from."""
    return target_fingerprint + BUILT_KERNELS


def _version() -> str:
    return __version__


@dataclass(frozen=True)
class WorkloadEntry:
    key: str
    canonical: str
    op_name: str
    shapes: dict[str, list[int]]

    @staticmethod
    def of(workload: Workload) -> WorkloadEntry:
        shapes = {name: list(shape) for name, shape in workload.shapes.items()}
        return WorkloadEntry(workload.key, workload.canonical_text, workload.op_name, shapes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: Any) -> WorkloadEntry:
        if not isinstance(d, dict):
            raise ValueError("a workload entry must be a JSON object")
        key, canonical, op_name, shapes = (d.get(k) for k in ("key", "canonical", "op_name", "shapes"))
        if not all(isinstance(x, str) for x in (key, canonical, op_name)) or not isinstance(shapes, dict):
            raise ValueError("a workload entry needs string key, canonical and op_name, and a shapes object")
        for name, shape in shapes.items():
            if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and 0 < n < 2**62
                                                    for n in shape)):
                raise ValueError(f"workload shape of {str(name)[:40]} is not a list of positive integers")
        return WorkloadEntry(key, canonical, op_name, {str(k): list(v) for k, v in shapes.items()})


@dataclass(frozen=True)
class Record:
    workload_key: str
    target_fingerprint: str
    trace_json: str
    kind: str
    latency_s: float | None = None  # the median
    latency_min_s: float | None = None
    latency_max_s: float | None = None
    spread: float | None = None
    samples: tuple[float, ...] = ()
    policy: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    version: str = field(default_factory=_version)
    created: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.kind not in RESULT_KINDS:
            raise ValueError(f"record kind must be one of {RESULT_KINDS}, got {self.kind!r}")
        if self.kind == "ok" and self.latency_s is None:
            raise ValueError("an 'ok' record needs a latency")

    @property
    def trace_hash(self) -> str:
        return trace_hash(self.trace_json)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @staticmethod
    def from_run(workload_key: str, target_fingerprint: str, trace_json: str, run: RunResult,
                 policy: MeasurePolicy | None = None, meta: dict[str, Any] | None = None) -> Record:
        return Record(
            workload_key, target_fingerprint, trace_json, run.kind,
            latency_s=run.median, latency_min_s=run.min, latency_max_s=run.max, spread=run.spread,
            samples=tuple(run.samples), policy=json.loads(policy.to_json()) if policy else {},
            message=run.message, meta=dict(meta or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["samples"] = list(self.samples)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Record:
        if not isinstance(d, dict):
            raise ValueError("a record must be a JSON object")
        text_fields = ("workload_key", "target_fingerprint", "trace_json", "kind")
        if any(not isinstance(d.get(k), str) for k in text_fields):
            raise ValueError(f"a record needs the text fields {', '.join(text_fields)}")
        try:
            return Record(
                d["workload_key"], d["target_fingerprint"], d["trace_json"], d["kind"],
                latency_s=d.get("latency_s"), latency_min_s=d.get("latency_min_s"), latency_max_s=d.get("latency_max_s"),
                spread=d.get("spread"), samples=tuple(d.get("samples") or ()), policy=dict(d.get("policy") or {}),
                message=str(d.get("message") or ""), meta=dict(d.get("meta") or {}),
                version=str(d.get("version") or "unknown"), created=float(d.get("created") or time.time()),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"malformed tuning record: {str(e)[:200]}") from None
