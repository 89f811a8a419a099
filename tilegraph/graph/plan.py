"""The static memory plan: every non-constant tensor gets an offset in one arena, reused by tensors
whose lifetimes do not overlap.

    plan = plan_memory(steps, graph)          # steps: (reads, writes) per kernel, in run order
    plan.offsets["t"], plan.arena_bytes, plan.lower_bound_bytes

Views (reshape, identity) share their source's storage: a storage's lifetime runs from its
first definition to the last read of any of its views. Graph inputs live from before the first
step, graph outputs to after the last. Offsets come from greedy best-fit, largest storage first
(an interval-colouring heuristic; `lower_bound_bytes`, the largest total live at any step, says
how far from optimal it is). Offsets are 64-byte aligned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tilegraph.graph.dims import argument_dims
from tilegraph.graph.ir import Graph

ALIGN = 64


@dataclass(frozen=True)
class MemoryPlan:
    offsets: Mapping[str, int]  # byte offset of every planned tensor (views included)
    arena_bytes: int
    lower_bound_bytes: int

    def to_json(self) -> dict:
        return {"offsets": dict(self.offsets), "arena_bytes": self.arena_bytes,
                "lower_bound_bytes": self.lower_bound_bytes}

    @classmethod
    def from_json(cls, data: dict) -> MemoryPlan:
        return cls(dict(data["offsets"]), int(data["arena_bytes"]), int(data["lower_bound_bytes"]))


def _aligned(n: int, align: int = ALIGN) -> int:
    return (n + align - 1) // align * align


def storage_roots(graph: Graph, views: Mapping[str, str]) -> dict[str, str]:
    """tensor -> the tensor whose storage it uses (views followed to their source)."""
    roots: dict[str, str] = {}
    for name in graph.values:
        root = name
        while root in views:
            root = views[root]
        roots[name] = root
    return roots


def plan_memory(steps: Sequence[tuple[Sequence[str], Sequence[str]]], graph: Graph,
                views: Mapping[str, str], align: int = ALIGN) -> MemoryPlan:
    """`align`: every offset a multiple of it (device sub-buffers need more than the host's 64)."""
    roots = storage_roots(graph, views)
    last = len(steps)
    birth: dict[str, int] = {}
    death: dict[str, int] = {}
    for name in graph.inputs:
        birth[roots[name]] = -1
        death[roots[name]] = -1
    for position, (reads, writes) in enumerate(steps):
        for name in writes:
            root = roots[name]
            birth.setdefault(root, position)
            death[root] = max(death.get(root, position), position)
        for name in reads:
            if name in graph.constants or argument_dims(name) is not None:  # a kernel's dims argument: no storage here
                continue
            root = roots[name]
            death[root] = max(death.get(root, position), position)
    for name in graph.outputs:
        if roots[name] in birth:
            death[roots[name]] = last
    sizes = {root: _aligned(max(graph.values[root].nbytes, 1), align) for root in birth}
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, birth, death)
    offsets: dict[str, int] = {}
    for root in sorted(birth, key=lambda r: (-sizes[r], birth[r], r)):
        size, b, d = sizes[root], birth[root], death[root]
        conflicts = sorted((o, s) for o, s, pb, pd in placed if not (pd < b or d < pb))
        offset = 0
        for o, s in conflicts:  # the lowest gap that fits among the storages alive at the same time
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        offsets[root] = offset
        placed.append((offset, size, b, d))
    arena = max((o + s for o, s, _, _ in placed), default=0)
    live_peak = 0
    for position in range(-1, last + 1):
        live_peak = max(live_peak, sum(sizes[r] for r in birth if birth[r] <= position <= death[r]))
    return MemoryPlan({name: offsets[root] for name, root in roots.items() if root in offsets}, arena, live_peak)


__all__ = ["MemoryPlan", "plan_memory", "storage_roots", "ALIGN"]
