"""Edges of the construction graph: scheduling moves between ETIR states, and which ones exist.

    for edge in neighbours(space, hw, s): edge.label, edge.target, edge.kind, edge.level

Moves (each leads to the canonical form of the new state, so equal programs reached by different
paths are one node):
    enlarge(level, axis) / shrink(level, axis)   next / previous aligned size (Roller's rTile alignment:
                                                 vector-width multiples on the vector axis, small integers
                                                 for register tiles, multiples of the inner level outside)
    rstep(axis, up/down)                         the k-block: next / previous of {1, 2, 4, ..., R}
    resplit(axis)                                move a factor 2 between the vector axis's interleave and
                                                 another axis's register tile (same accumulator count)
    unroll(up/down), parallel(up/down), pack(operand)
    (Stop is implicit: markov.py gives it score 0.)

    before: reg=(1, 16) l1=(1, 16)     enlarge(reg, 0)     after: reg=(2, 16) l1=(2, 16)

An edge exists only if its target is feasible: accumulators + operand vectors fit the vector
registers, the L1 / L2 working sets fit those caches, and no axis pads more than TAIL_WASTE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tilegraph.tune.gensor.state import SPATIAL_LEVELS, TAIL_WASTE, EtirState, IterSpace, canonical, footprint_bytes, waste
from tilegraph.tune.hardware import HardwareModel

REG_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16)
LEVEL_MULTIPLES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024)
UNROLLS = (1, 2, 4, 8)
MAX_UNROLLED_BODY = 512


@dataclass(frozen=True)
class Edge:
    label: str
    kind: str  # enlarge | shrink | rstep | resplit | unroll | parallel | pack
    level: str  # reg | l1 | l2 | "" for moves not tied to a level
    target: EtirState


def aligned_sizes(space: IterSpace, state: EtirState, level: str, axis: int) -> list[int]:
    """The sizes an axis may take at a level given the level below it (sorted)."""
    e = space.spatial[axis]
    if level == "reg":
        if axis == state.vec_axis and state.vec_width > 1:
            w = state.vec_width
            return sorted({min(w * m, -(-e // w) * w) for m in range(1, 9)})
        return sorted({min(r, e) for r in REG_SIZES})
    inner = state.reg[axis] if level == "l1" else state.l1[axis]
    cover = -(-e // inner) * inner
    return sorted({min(inner * m, cover) for m in LEVEL_MULTIPLES})


def rstep_sizes(extent: int) -> list[int]:
    sizes = {extent}
    p = 1
    while p < extent:
        sizes.add(p)
        p *= 2
    return sorted(sizes)


def feasible(space: IterSpace, hw: HardwareModel, s: EtirState, minimal: EtirState | None = None) -> str | None:
    """None when the state may be a node of the graph, else the reason it may not."""
    acc = s.accumulators
    if acc + s.operand_vectors > hw.vector_registers:
        return f"{acc} accumulators + {s.operand_vectors} operand vectors exceed {hw.vector_registers} registers"
    if acc * s.unroll > MAX_UNROLLED_BODY:
        return "unrolled micro-kernel too large"
    floors = (minimal.reg, minimal.l1, minimal.l2) if minimal is not None else (None, None, None)
    for a, e in enumerate(space.spatial):
        for level, tiles, floor in zip(SPATIAL_LEVELS, (s.reg, s.l1, s.l2), floors):
            t = tiles[a]
            if waste(e, t) > TAIL_WASTE and not (floor is not None and t == floor[a]):
                return f"axis {space.axis_names[a]} pads {waste(e, t):.0%} at {level}"
    for r, e in enumerate(space.reduce):
        if waste(e, s.rstep[r]) > TAIL_WASTE and s.rstep[r] != 1:
            return f"reduce axis pads {waste(e, s.rstep[r]):.0%}"
    if space.kind == "reuse" and s.vec_axis >= 0:
        return None  # micro-kernel family: whole reductions per register tile; the model prices the traffic
    tiles_l1 = (*s.l1, *s.rstep)
    l1 = sum(footprint_bytes(o, tiles_l1) for o in space.operands) + math.prod(s.l1) * space.output_bytes
    if l1 > hw.l1d_bytes and s.l1 != s.reg:
        return f"L1 working set {l1} B exceeds {hw.l1d_bytes} B"
    tiles_l2 = (*s.l2, *s.rstep)
    l2 = sum(footprint_bytes(o, tiles_l2) for o in space.operands) + math.prod(s.l2) * space.output_bytes
    if l2 > hw.l2_bytes and s.l2 != s.l1:
        return f"L2 working set {l2} B exceeds {hw.l2_bytes} B"
    return None


def _with_level(s: EtirState, level: str, axis: int, size: int) -> EtirState:
    values = list(s.level(level))
    values[axis] = size
    return replace(s, **{level: tuple(values)})


def _step(sizes: list[int], current: int, direction: int) -> int | None:
    if direction > 0:
        bigger = [x for x in sizes if x > current]
        return bigger[0] if bigger else None
    smaller = [x for x in sizes if x < current]
    return smaller[-1] if smaller else None


def candidate_moves(space: IterSpace, s: EtirState, packable: tuple[str, ...] = ()) -> list[tuple[str, str, str, EtirState]]:
    """(label, kind, level, raw target) of every move, before canonicalisation and feasibility."""
    out: list[tuple[str, str, str, EtirState]] = []
    for level in ("reg", "l1", "l2"):
        for a in range(space.num_spatial):
            current = s.level(level)[a]
            # sizes that pad too much are stepped over, not dead ends: 18 of 32 rows grows to 36
            # when 24 (which pads to 48) is refused
            sizes = [t for t in aligned_sizes(space, s, level, a)
                     if t == current or waste(space.spatial[a], t) <= TAIL_WASTE]
            for direction, kind in ((1, "enlarge"), (-1, "shrink")):
                size = _step(sizes, s.level(level)[a], direction)
                if size is not None:
                    out.append((f"{kind}({level},{space.axis_names[a]})", kind, level, _with_level(s, level, a, size)))
    for r, e in enumerate(space.reduce):
        for direction, word in ((1, "up"), (-1, "down")):
            size = _step(rstep_sizes(e), s.rstep[r], direction)
            if size is not None:
                steps = list(s.rstep)
                steps[r] = size
                name = space.axis_names[space.num_spatial + r]
                out.append((f"rstep({name},{word})", "rstep", "l1", replace(s, rstep=tuple(steps))))
    v = s.vec_axis
    if v >= 0 and s.vec_width > 1:
        for a in range(space.num_spatial):
            if a == v:
                continue
            reg = list(s.reg)
            if reg[a] % 2 == 0 and reg[v] * 2 <= 8 * s.vec_width:
                reg[a] //= 2
                reg[v] *= 2
                out.append((f"resplit({space.axis_names[a]}->vec)", "resplit", "reg", replace(s, reg=tuple(reg))))
            reg = list(s.reg)
            if s.interleave % 2 == 0 and reg[a] * 2 <= space.spatial[a]:
                reg[a] *= 2
                reg[v] //= 2
                out.append((f"resplit(vec->{space.axis_names[a]})", "resplit", "reg", replace(s, reg=tuple(reg))))
    if space.has_reduce:
        for direction, word in ((1, "up"), (-1, "down")):
            u = _step(list(UNROLLS), s.unroll, direction)
            if u is not None and s.rstep[-1] % u == 0:
                out.append((f"unroll({word})", "unroll", "", replace(s, unroll=u)))
    for direction, word in ((1, "up"), (-1, "down")):
        p = s.parallel + direction
        if 0 <= p <= space.num_spatial:
            out.append((f"parallel({word})", "parallel", "", replace(s, parallel=p)))
    for name in packable:
        packed = tuple(sorted(set(s.pack) ^ {name}))
        out.append((f"pack({name})", "pack", "l2", replace(s, pack=packed)))
    return out


def neighbours(space: IterSpace, hw: HardwareModel, s: EtirState, minimal: EtirState | None = None,
               packable: tuple[str, ...] = ()) -> list[Edge]:
    """Feasible, distinct successors of `s` (self-loops removed), in a deterministic order."""
    seen: set[EtirState] = {s}
    edges: list[Edge] = []
    for label, kind, level, raw in candidate_moves(space, s, packable):
        target = canonical(space, raw)
        if target in seen or feasible(space, hw, target, minimal) is not None:
            continue
        seen.add(target)
        edges.append(Edge(label, kind, level, target))
    return edges


__all__ = ["Edge", "aligned_sizes", "candidate_moves", "feasible", "neighbours", "rstep_sizes"]
