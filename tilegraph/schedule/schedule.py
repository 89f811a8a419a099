"""Schedule: the current loop IR of a workload plus the trace of primitives that produced it.

    sch = tg.Schedule(wl)
    i, j, k = sch.loops(C)
    io, ii = sch.split(i, 32)
    sch.trace.to_json()                     # replayable record
    tg.Schedule.replay(wl, sch.trace)       # the same IR, identical

Every method is a thin wrapper: it resolves sampled values, calls the primitive (a pure
function in schedule/primitives/) and records an Instruction. A primitive that raises leaves the
schedule unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from tilegraph.errors import ScheduleError
from tilegraph.loop.from_te import workload_to_func
from tilegraph.loop.ir import Func
from tilegraph.loop.printer import func_str
from tilegraph.loop.rename import name_slots, rename
from tilegraph.loop.visit import blocks, loops_above
from tilegraph.schedule import sampling
from tilegraph.schedule.primitives import PRIMITIVES
from tilegraph.schedule.trace import BUILT_KERNEL, Instruction, Trace
from tilegraph.te.tensor import Tensor
from tilegraph.te.workload import Workload


class LoopRV(str):
    """A loop, named. Names are deterministic, so they survive replay."""


class BlockRV(str):
    """A block, named (initially the name of the tensor it computes)."""


class IntRV(int):
    """A sampled integer; using it as a primitive argument links that argument to the decision."""

    rv_name: str

    def __new__(cls, value: int, rv_name: str) -> IntRV:
        obj = super().__new__(cls, value)
        obj.rv_name = rv_name
        return obj


class Schedule:
    def __init__(self, workload: Workload, seed: int | None = None, func: Func | None = None):
        self.workload = workload
        self.func: Func = func if func is not None else workload_to_func(workload)
        self._names = name_slots(self.func)
        self._instructions: list[Instruction] = []
        self._rng = random.Random(seed)
        self._rv_count = 0

    # ------------------------------------------------------------------ inspection
    @property
    def trace(self) -> Trace:
        return Trace(self.workload.key, tuple(self._instructions), names=self._names)

    @property
    def mod(self) -> Func:
        return self.func

    def __str__(self) -> str:
        return func_str(self.func)

    def copy(self) -> Schedule:
        other = Schedule.__new__(Schedule)
        other.__dict__.update(self.__dict__)
        other._instructions = list(self._instructions)
        other._rng = random.Random()
        other._rng.setstate(self._rng.getstate())
        return other

    def get_block(self, block: str | Tensor) -> BlockRV:
        name = block.name if isinstance(block, Tensor) else str(block)
        if name not in {b.name for b in blocks(self.func.body)}:
            raise ScheduleError(f"no block named {name!r} (blocks: {self.block_names()})")
        return BlockRV(name)

    def block_names(self) -> list[str]:
        return [b.name for b in blocks(self.func.body)]

    def loops(self, block: str | Tensor) -> tuple[LoopRV, ...]:
        """The loops enclosing a block, outermost first."""
        name = self.get_block(block)
        return tuple(LoopRV(lp.var.name) for lp in loops_above(self.func, name))

    # ------------------------------------------------------------------ loop primitives
    def split(self, loop: str, factors: int | Sequence[int | None]) -> tuple[LoopRV, ...]:
        """Split a loop. An int is the inner factor: split(i, 32) == split(i, [None, 32])."""
        facs = [None, factors] if isinstance(factors, int) else list(factors)
        return tuple(LoopRV(n) for n in self._apply("split", loop=str(loop), factors=facs))

    def reorder(self, *loops: str) -> None:
        self._apply("reorder", loops=[str(x) for x in loops])

    def fuse(self, *loops: str) -> LoopRV:
        return LoopRV(self._apply("fuse", loops=[str(x) for x in loops])[0])

    def parallel(self, loop: str) -> None:
        self._apply("parallel", loop=str(loop))

    def vectorize(self, loop: str) -> None:
        self._apply("vectorize", loop=str(loop))

    def unroll(self, loop: str) -> None:
        self._apply("unroll", loop=str(loop))

    def bind(self, loop: str, thread_axis: str) -> None:
        self._apply("bind", loop=str(loop), thread_axis=thread_axis)

    # ------------------------------------------------------------------ data-movement primitives
    def cache_read(self, block: str | Tensor, buffer: str | Tensor, scope: str = "local",
                   layout: dict[str, Any] | None = None) -> BlockRV:
        """A copy of `buffer` (optionally packed: {"split": [[dim, factor]], "order": [...]}) that
        only `block` reads; returns the copy block."""
        inputs: dict[str, Any] = {"block": _name(block), "buffer": _name(buffer), "scope": scope}
        if layout is not None:
            inputs["layout"] = {k: _plain(v) for k, v in layout.items()}
        return BlockRV(self._apply("cache_read", **inputs)[0])

    def cache_write(self, block: str | Tensor, scope: str = "local") -> BlockRV:
        """`block` computes into a new buffer; returns the write-back block."""
        return BlockRV(self._apply("cache_write", block=_name(block), scope=scope)[0])

    def compute_at(self, block: str | Tensor, loop: str) -> None:
        self._apply("compute_at", block=_name(block), loop=str(loop))

    def reverse_compute_at(self, block: str | Tensor, loop: str) -> None:
        self._apply("reverse_compute_at", block=_name(block), loop=str(loop))

    def compute_inline(self, block: str | Tensor) -> None:
        self._apply("compute_inline", block=_name(block))

    def storage_pad(self, buffer: str | Tensor, padding: Sequence[int]) -> None:
        self._apply("storage_pad", buffer=_name(buffer), padding=[int(p) for p in padding])

    def decompose_reduction(self, block: str | Tensor, loop: str) -> BlockRV:
        """Split `block`'s init into a new block placed before `loop`; returns the init block."""
        return BlockRV(self._apply("decompose_reduction", block=_name(block), loop=str(loop))[0])

    def rfactor(self, block: str | Tensor, loop: str, scope: str = "global") -> BlockRV:
        """Partial results of `block` along reduction loop `loop` go to a new buffer (in `scope`)
        and block `<out>_rf` where `loop` is spatial; `block` then reduces them. Returns the rf block."""
        return BlockRV(self._apply("rfactor", block=_name(block), loop=str(loop), scope=scope)[0])

    # ------------------------------------------------------------------ generic entry
    def apply(self, kind: str, **inputs: Any) -> tuple[str, ...]:
        """Apply any registered primitive by name (used by primitives added without a method)."""
        return self._apply(kind, **inputs)

    def _apply(self, kind: str, **inputs: Any) -> tuple[str, ...]:
        if kind not in PRIMITIVES:
            raise ScheduleError(f"unknown schedule primitive {kind!r}; known: {sorted(PRIMITIVES)}")
        encoded = {k: _encode(v) for k, v in inputs.items()}
        plain = {k: _plain(v) for k, v in inputs.items()}
        new_func, outputs = PRIMITIVES[kind](self.func, **plain)
        self.func = new_func
        self._instructions.append(Instruction(kind, encoded, tuple(outputs)))
        return tuple(outputs)

    # ------------------------------------------------------------------ sampling
    def _new_rvs(self, values: Sequence[int]) -> tuple[IntRV, ...]:
        out = []
        for v in values:
            out.append(IntRV(int(v), f"v{self._rv_count}"))
            self._rv_count += 1
        return tuple(out)

    def sample_tile(self, loop: str, n: int, max_innermost: int | None = None,
                    decision: Sequence[int] | None = None) -> tuple[IntRV, ...]:
        """n factors of the loop's extent (product exact), recorded as a decision."""
        from tilegraph.schedule.primitives.common import get_loop

        extent = get_loop(self.func, str(loop)).extent
        if decision is None:
            values = sampling.sample_perfect_tile(self._rng, extent, n, max_innermost)
        else:
            values = sampling.check_perfect_tile(decision, extent, n)
        rvs = self._new_rvs(values)
        inputs = {"loop": str(loop), "n": n, "max_innermost": max_innermost}
        self._instructions.append(Instruction("sample_tile", inputs, tuple(r.rv_name for r in rvs), list(values)))
        return rvs

    def sample_categorical(self, candidates: Sequence[int], probs: Sequence[float] | None = None,
                           decision: int | None = None) -> IntRV:
        """One of `candidates` (integers); the decision recorded is its index."""
        if decision is None:
            index = sampling.sample_categorical(self._rng, candidates, probs)
        else:
            index = int(decision)
            if not 0 <= index < len(candidates):
                raise ScheduleError(f"sample_categorical decision {index} is out of range for {len(candidates)} candidates")
        (rv,) = self._new_rvs([int(candidates[index])])
        inputs = {"candidates": [int(c) for c in candidates], "probs": None if probs is None else list(probs)}
        self._instructions.append(Instruction("sample_categorical", inputs, (rv.rv_name,), index))
        return rv

    # ------------------------------------------------------------------ replay
    @staticmethod
    def replay(workload: Workload, trace: Trace | str) -> Schedule:
        """Apply a trace to a fresh schedule of `workload`; refused if the workload key differs
        (but for the key of the same computation without constant inputs, `Workload.plain`).
        A trace recorded on an equal computation with other tensor or axis names is renamed as it
        replays (its `names` against this workload's), so the replayed trace speaks this workload's names."""
        tr = Trace.from_json(trace) if isinstance(trace, str) else trace
        if tr.workload_key not in (workload.key, workload.plain.key):
            raise ScheduleError(
                f"trace was recorded for workload {tr.workload_key}, not for {workload.key} ({workload.op_name})"
            )
        sch = Schedule(workload)
        recorded = None
        if tr.names is not None and tr.names != sch._names:
            # the same computation under other names: replay in the recorded names beside this one,
            # and translate each instruction through the names the two programs hold at that point
            try:
                recorded = Schedule(workload, func=rename(sch.func, tr.names))
            except ValueError as e:
                raise ScheduleError(f"trace names do not fit workload {workload.op_name}: {e}") from None
        values: dict[str, int] = {}
        recorded_values: dict[str, int] = {}
        for n, inst in enumerate(tr.instructions):
            try:
                if recorded is not None:
                    names = dict(zip(name_slots(recorded.func), name_slots(sch.func)))
                    recorded._replay_one(inst, recorded_values)
                    inst = _renamed(inst, names)
                sch._replay_one(inst, values)
            except ScheduleError:
                raise
            except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as e:
                # a trace is data from a file: a malformed instruction is refused, never a crash
                raise ScheduleError(f"trace instruction {n} ({inst.kind}) is malformed: {str(e)[:200]}") from None
        return sch

    def _replay_one(self, inst: Instruction, values: dict[str, int]) -> None:
        """Apply one recorded instruction; `values` maps sampled-value names to their integers."""
        if inst.kind == "sample_tile":
            rvs = self.sample_tile(inst.inputs["loop"], inst.inputs["n"], inst.inputs.get("max_innermost"),
                                   decision=inst.decision)
            values.update({r.rv_name: int(r) for r in rvs})
        elif inst.kind == "sample_categorical":
            rv = self.sample_categorical(inst.inputs["candidates"], inst.inputs.get("probs"), decision=inst.decision)
            values[rv.rv_name] = int(rv)
        elif inst.kind == BUILT_KERNEL:
            raise ScheduleError("this trace names a kernel the model compiler built by fusion (a measurement "
                                "record of its orchestration), not a schedule: it does not replay")
        else:
            inputs = {k: _decode(v, values) for k, v in inst.inputs.items()}
            outputs = self._apply(inst.kind, **inputs)
            if inst.outputs and tuple(outputs) != tuple(inst.outputs):
                raise ScheduleError(f"replay of {inst.kind} produced {outputs}, the trace recorded {inst.outputs}")


NAMED_INPUTS = ("loop", "loops", "block", "buffer")  # the instruction inputs that name loops, blocks or buffers


def _renamed(inst: Instruction, renames: dict[str, str]) -> Instruction:
    """`inst` with the loops, blocks and buffers it names translated, and the names it recorded as
    outputs left for the primitive to produce (they are checked on the recorded side)."""
    def tr(v: Any) -> Any:
        if isinstance(v, str):
            return renames.get(v, v)
        if isinstance(v, list):
            return [tr(x) for x in v]
        return v

    inputs = {k: tr(v) if k in NAMED_INPUTS else v for k, v in inst.inputs.items()}
    return Instruction(inst.kind, inputs, (), inst.decision)


def _name(x: str | Tensor) -> str:
    return x.name if isinstance(x, Tensor) else str(x)


def _encode(v: Any) -> Any:
    if isinstance(v, IntRV):
        return {"rv": v.rv_name}
    if isinstance(v, (list, tuple)):
        return [_encode(x) for x in v]
    if isinstance(v, (LoopRV, BlockRV)):
        return str(v)
    return v


def _plain(v: Any) -> Any:
    if isinstance(v, IntRV):
        return int(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (LoopRV, BlockRV)):
        return str(v)
    return v


def _decode(v: Any, values: dict[str, int]) -> Any:
    if isinstance(v, dict) and set(v) == {"rv"}:
        if v["rv"] not in values:
            raise ScheduleError(f"trace refers to sampled value {v['rv']!r} before it is sampled")
        return IntRV(values[v["rv"]], v["rv"])
    if isinstance(v, list):
        return [_decode(x, values) for x in v]
    return v
