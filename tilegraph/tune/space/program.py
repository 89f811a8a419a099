"""Program: one point of the design space, with what is needed to mutate it, and the mutators.

    p = sample(wl, "multi_level_tiling", rng)         # a random program of a sketch
    p = recognise(wl, trace_json)                     # a recorded trace: a sketch's (decisions recovered) or foreign
    child = mutate(wl, p, rng)                        # None when the mutant is illegal (the postprocessor refused it)

A sketch program mutates by changing one decision and re-running its sketch (every choice that
depends on the decision is derived again). A foreign program (Gensor's picks, hand-written traces)
mutates through its trace: a tile mutation moves a factor between two levels of a `sample_tile`
decision or of a literal `split` (the product is kept, so the split still covers its loop), a
categorical mutation re-draws one `sample_categorical`; the trace is replayed to check it. Every
program then passes the postprocessor (postproc.py: no explosion of unrolled code or local
buffers), or the mutant is dropped.

Mutator weights follow MetaSchedule's LLVM defaults: tile size 0.90, the rest (compute location,
unroll, parallel granularity and packing, all categorical decisions here) 0.10.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from typing import Any

from tilegraph.errors import ScheduleError
from tilegraph.loop.ir import Func
from tilegraph.schedule.sampling import divisors
from tilegraph.schedule.schedule import Schedule
from tilegraph.schedule.trace import Trace
from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.space.decider import Decider
from tilegraph.tune.space.postproc import check_program
from tilegraph.tune.space.sketch import MAX_INNERMOST, apply_sketch, space_for

TILE_WEIGHT = 0.9
MUTATE_ATTEMPTS = 8


@dataclass(frozen=True)
class Program:
    trace_json: str
    func: Func = field(compare=False, repr=False)
    sketch: str | None = None  # None: a foreign trace, mutated through the trace itself
    decisions: tuple[Any, ...] = ()


def checked_program(sch: Schedule, sketch: str | None, decisions: list[Any]) -> Program:
    """The Program of a scheduled sketch (or foreign trace); ScheduleError when the postprocessor refuses it."""
    ok, why = check_program(sch.func)
    if not ok:
        raise ScheduleError(f"postprocessor: {why}")
    return Program(sch.trace.to_json(), sch.func, sketch, tuple(json.loads(json.dumps(decisions))))


def sample(workload: Workload, sketch: str, rng: random.Random, given: list[Any] | None = None) -> Program:
    decider = Decider(rng, given)
    sch = apply_sketch(workload, sketch, decider)
    return checked_program(sch, sketch, decider.taken)


def recognise(workload: Workload, trace_json: str, target: Target | None = None) -> Program | None:
    """The program of a recorded trace (a sketch's, if one of the target's sketches re-derives it);
    None when it does not replay on this workload."""
    try:
        sch = Schedule.replay(workload, trace_json)
    except ScheduleError:
        return None
    trace = sch.trace
    decisions = [inst.decision for inst in trace.instructions if inst.decision is not None]
    canonical = trace.to_json()
    for sketch in space_for(workload, target):
        try:
            again = sample(workload, sketch, random.Random(0), decisions)
        except ScheduleError:
            continue
        if again.trace_json == canonical:
            return again
    return Program(canonical, sch.func, None, ())


def mutate(workload: Workload, program: Program, rng: random.Random) -> Program | None:
    for _ in range(MUTATE_ATTEMPTS):
        try:
            child = _mutate_sketch(workload, program, rng) if program.sketch else _mutate_trace(workload, program, rng)
        except ScheduleError:
            continue
        if child is not None and child.trace_json != program.trace_json:
            return child
    return None


def _pick_kind(rng: random.Random, tiles: list[int], cats: list[int]) -> list[int]:
    if tiles and (not cats or rng.random() < TILE_WEIGHT):
        return tiles
    return cats


def _mutate_sketch(workload: Workload, program: Program, rng: random.Random) -> Program | None:
    sampling = [i for i in Trace.from_json(program.trace_json).instructions if i.decision is not None]
    decisions = list(program.decisions)
    tiles = [i for i, d in enumerate(decisions) if isinstance(d, list) and len(d) > 1]
    cats = [i for i, inst in enumerate(sampling) if inst.kind == "sample_categorical"
            and len(inst.inputs["candidates"]) > 1]
    pool = _pick_kind(rng, tiles, cats)
    if not pool:
        return None
    index = rng.choice(pool)
    if index in tiles:
        limit = sampling[index].inputs.get("max_innermost") or MAX_INNERMOST
        moved = move_factor(decisions[index], rng, limit)
        if moved is None:
            return None
        decisions[index] = moved
    else:
        n = len(sampling[index].inputs["candidates"])
        decisions[index] = rng.choice([c for c in range(n) if c != decisions[index]])
    return sample(workload, program.sketch or "", rng, decisions)


def move_factor(factors: list[int], rng: random.Random, max_innermost: int | None = None) -> list[int] | None:
    """Divide one level's factor by a divisor and multiply another level's by it (product kept)."""
    sources = [i for i, f in enumerate(factors) if f > 1]
    if not sources or len(factors) < 2:
        return None
    src = rng.choice(sources)
    dst = rng.choice([i for i in range(len(factors)) if i != src])
    d = rng.choice([x for x in divisors(factors[src]) if x > 1])
    out = list(factors)
    out[src] //= d
    out[dst] *= d
    if max_innermost is not None and out[-1] > max_innermost:
        return None
    return out


def _mutate_trace(workload: Workload, program: Program, rng: random.Random) -> Program | None:
    trace = Trace.from_json(program.trace_json)
    tiles = [n for n, inst in enumerate(trace.instructions)
             if (inst.kind == "sample_tile" and len(inst.decision or ()) > 1)
             or (inst.kind == "split" and len(inst.inputs.get("factors", ())) > 1
                 and all(isinstance(f, int) for f in inst.inputs["factors"]))]
    cats = [n for n, inst in enumerate(trace.instructions)
            if inst.kind == "sample_categorical" and len(inst.inputs["candidates"]) > 1]
    pool = _pick_kind(rng, tiles, cats)
    if not pool:
        return None
    n = rng.choice(pool)
    inst = trace.instructions[n]
    if inst.kind == "sample_tile":
        moved = move_factor(list(inst.decision), rng, inst.inputs.get("max_innermost"))
        if moved is None:
            return None
        trace = trace.with_decision(n, moved)
    elif inst.kind == "split":
        moved = move_factor(list(inst.inputs["factors"]), rng, MAX_INNERMOST)
        if moved is None:
            return None
        insts = list(trace.instructions)
        insts[n] = replace(inst, inputs={**inst.inputs, "factors": moved})
        trace = replace(trace, instructions=tuple(insts))
    else:
        choices = [c for c in range(len(inst.inputs["candidates"])) if c != inst.decision]
        trace = trace.with_decision(n, rng.choice(choices))
    sch = Schedule.replay(workload, trace)
    return checked_program(sch, None, [])
