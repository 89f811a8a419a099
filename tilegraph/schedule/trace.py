"""Traces: the JSON record of every primitive and sampled decision applied to a workload.

    {"version": 1, "workload_key": "...",
     "instructions": [
        {"kind": "sample_tile", "inputs": {"loop": "i", "n": 2}, "decision": [16, 32], "outputs": ["v0", "v1"]},
        {"kind": "split", "inputs": {"loop": "i", "factors": [{"rv": "v0"}, {"rv": "v1"}]}, "outputs": ["i_0", "i_1"]}]}

Loops and blocks are referred to by name (names are deterministic, so a replay regenerates them);
sampled values are referred to as {"rv": name}, so changing one decision and replaying changes
every instruction that used it. `names` lists the tensor and loop names of the workload the trace
was recorded on (`loop/rename.py: name_slots`): a workload with the same key but other names (the
op library's matmul and a hand-written one) replays the trace through a renaming, and the replayed
trace speaks that workload's names. `names` is not part of a trace's identity (`canonical_trace_json`
leaves it out); the instructions are, so one schedule written in two workloads' names is two traces.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from tilegraph.errors import ScheduleError

TRACE_VERSION = 1
# The one instruction of a trace that names a kernel built outside a schedule (a fused kernel of
# the model compiler, tune/session.py: built_kernel_trace): it identifies a measurement record
# and never replays.
BUILT_KERNEL = "built_kernel"


@dataclass(frozen=True)
class Instruction:
    kind: str
    inputs: dict[str, Any]
    outputs: tuple[str, ...] = ()
    decision: Any = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "inputs": self.inputs, "outputs": list(self.outputs)}
        if self.decision is not None:
            d["decision"] = self.decision
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Instruction:
        try:
            return Instruction(str(d["kind"]), dict(d["inputs"]), tuple(d.get("outputs", ())), d.get("decision"))
        except (KeyError, TypeError, ValueError) as e:
            text = repr(d)
            raise ScheduleError(f"malformed trace instruction {text[:80]}: {e}") from None


@dataclass(frozen=True)
class Trace:
    workload_key: str
    instructions: tuple[Instruction, ...] = field(default=())
    version: int = TRACE_VERSION
    names: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "version": self.version,
            "workload_key": self.workload_key,
            "instructions": [i.to_dict() for i in self.instructions],
        }
        if self.names is not None:
            d["names"] = list(self.names)
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @staticmethod
    def from_json(text: str | dict[str, Any]) -> Trace:
        try:
            d = json.loads(text) if isinstance(text, str) else text
        except json.JSONDecodeError as e:
            raise ScheduleError(f"trace is not valid JSON: {e}") from None
        except RecursionError:
            raise ScheduleError("trace JSON is nested too deeply") from None
        if not isinstance(d, dict) or "instructions" not in d or "workload_key" not in d:
            raise ScheduleError("trace JSON must be an object with 'workload_key' and 'instructions'")
        if not isinstance(d["instructions"], list):
            raise ScheduleError("trace 'instructions' must be a list")
        version = d.get("version")
        if version != TRACE_VERSION:
            raise ScheduleError(f"trace version {version!r} is not supported (this tilegraph reads {TRACE_VERSION})")
        names = d.get("names")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ScheduleError("trace 'names' must be a list of strings")
        return Trace(str(d["workload_key"]), tuple(Instruction.from_dict(x) for x in d["instructions"]), version,
                     None if names is None else tuple(names))

    @property
    def decisions(self) -> dict[int, Any]:
        """Index of each sampling instruction -> its decision."""
        return {i: inst.decision for i, inst in enumerate(self.instructions) if inst.decision is not None}

    def with_decision(self, index: int, decision: Any) -> Trace:
        """The same trace with one sampling decision changed (replay to get the new program)."""
        inst = self.instructions[index]
        if inst.decision is None:
            raise ScheduleError(f"instruction {index} ({inst.kind}) is not a sampling instruction")
        insts = list(self.instructions)
        insts[index] = replace(inst, decision=decision)
        return replace(self, instructions=tuple(insts))

    def __len__(self) -> int:
        return len(self.instructions)


def canonical_trace_json(trace_json: str, keep_names: bool = False) -> str:
    """The trace's identity: sorted keys, no whitespace and (unless `keep_names`, as stored) no
    `names`, so equal schedules of equal workloads hash equally whatever the workloads' names."""
    try:
        d = json.loads(trace_json)
        if isinstance(d, dict) and not keep_names:
            d.pop("names", None)
        return json.dumps(d, sort_keys=True, separators=(",", ":"))
    except (TypeError, json.JSONDecodeError, RecursionError):
        return trace_json


def trace_hash(trace_json: str) -> str:
    """A short stable hash of `canonical_trace_json` (the database's duplicate check)."""
    return hashlib.sha256(canonical_trace_json(trace_json).encode()).hexdigest()[:32]
