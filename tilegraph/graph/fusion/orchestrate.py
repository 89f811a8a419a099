"""orchestrate: the set of candidate kernels that computes the graph in the least measured time,
by binary linear programming (Korch), solved with scipy.optimize.milp (HiGHS).

    result = orchestrate(graph, groups, cands, keys, cost)   # keys[i]: cands[i]'s workload key,
                                                              # cost[i]: its seconds (None: not built)
    result.chosen          # candidates in execution order
    result.objective_s, result.greedy_s, result.solver_s, result.segments, result.distinct_segments

The program, per segment: a binary x_k per candidate; minimise sum cost_k x_k subject to
- every tensor the segment must hand on (a graph output, or a tensor read after the segment) has a
  chosen producer: sum_{k writes t} x_k >= 1;
- every tensor a chosen kernel reads has a chosen producer: sum_{k writes t} x_k - x_j >= 0.
Tensors inside a kernel are recomputed there, not written, so a tensor may be computed by two
kernels (Korch's recomputation) and an intermediate nobody reads is never written. Each candidate
writes tensors whose every read input is upstream of it, so the chosen kernels always order by
their outputs' positions (no cycle).

Segments: the graph is cut between greedy groups wherever at most MAX_CROSSING tensors cross
(residual blocks, transformer layers). Every candidate lies inside one greedy group, so cutting
there loses no choice. Segments with the same structure (candidate workload keys and wiring) are
solved once and the solution reused (BERT's 12 layers: one program). The greedy groups are
candidates, so greedy is feasible and the optimum costs no more than greedy. A segment keeps its
greedy kernels unless the optimum is more than MIN_GAIN cheaper (kernels timed alone differ by a
few percent from run to run: a smaller "gain" is noise, and each split adds a launch and a round
trip through memory that timing kernels alone does not see), or when HiGHS runs out of time.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.fusion.candidates import Candidate
from tilegraph.graph.fusion.partition import Group
from tilegraph.graph.ir import Graph
from tilegraph.graph.ops.registry import op_def
from tilegraph.graph.plan import storage_roots

MAX_CROSSING = 2
TIME_LIMIT_S = 5.0
MIN_GAIN = 0.03  # a segment leaves greedy only for a measured gain above the timing noise of its kernels


@dataclass(frozen=True)
class Orchestration:
    chosen: tuple[Candidate, ...]  # execution order
    objective_s: float  # sum of the chosen kernels' measured costs
    greedy_s: float  # the same for the greedy partition
    solver_s: float  # time in HiGHS, all distinct segments together
    segments: int
    distinct_segments: int


def view_roots(graph: Graph) -> dict[str, str]:
    """tensor -> the tensor holding its data (every view output followed to its source)."""
    return storage_roots(graph, {n.outputs[0]: n.inputs[0] for n in graph.nodes if op_def(n.op).view})


def orchestrate(graph: Graph, groups: Sequence[Group], cands: Sequence[Candidate], keys: Sequence[str],
                cost: Sequence[float | None], time_limit_s: float = TIME_LIMIT_S,
                min_gain: float = MIN_GAIN) -> Orchestration:
    roots = view_roots(graph)
    free = set(graph.inputs) | set(graph.constants)
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    cuts = _cuts(graph, groups, roots, free)
    starts = [0, *cuts]
    segment_of = np.searchsorted(np.array(cuts, dtype=int), np.arange(len(graph.nodes)), side="right")
    producer = {o: (i, slot) for i, n in enumerate(graph.nodes) for slot, o in enumerate(n.outputs)}
    members: list[list[int]] = [[] for _ in starts]
    for i, c in enumerate(cands):
        segs = {int(segment_of[order[m]]) for m in c.group.nodes}
        if cost[i] is not None and len(segs) == 1:
            members[segs.pop()].append(i)
    required = _required(graph, roots, free, segment_of, producer)

    def local(t: str, s: int) -> str | None:
        """A tensor written in segment s, named by its position there (None: from outside)."""
        if t not in producer:
            return None  # a graph input or a constant
        pos, slot = producer[t]
        return f"{pos - starts[s]}.{slot}" if int(segment_of[pos]) == s else None

    solutions: dict[str, list[int]] = {}  # signature -> chosen positions in the canonical order
    chosen: list[int] = []
    solver_s = 0.0
    for s, ids in enumerate(members):
        def describe(i: int, s: int = s) -> tuple:
            c = cands[i]
            return (tuple(order[m] - starts[s] for m in c.group.nodes), keys[i],
                    tuple(local(roots[t], s) for t in c.produces),
                    tuple(sorted(n for t in c.needs if (n := local(roots[t], s)) is not None)))

        described = {i: describe(i) for i in ids}
        ordered = sorted(ids, key=lambda i: described[i][0])
        need_out = sorted(local(t, s) or "" for t in required[s])
        signature = hashlib.sha256(json.dumps([[described[i] for i in ordered], need_out]).encode()).hexdigest()
        if signature not in solutions:
            begin = time.perf_counter()
            solutions[signature] = _solve([cands[i] for i in ordered], [cost[i] for i in ordered],
                                          {local(t, s) for t in required[s]}, lambda t, s=s: local(roots[t], s),
                                          time_limit_s, min_gain)
            solver_s += time.perf_counter() - begin
        chosen += [ordered[p] for p in solutions[signature]]
    chosen.sort(key=lambda i: max(producer[o][0] for o in cands[i].produces))
    objective = sum(cost[i] or 0.0 for i in chosen)
    greedy = sum(cost[i] or 0.0 for i, c in enumerate(cands) if c.greedy)
    return Orchestration(tuple(cands[i] for i in chosen), objective, greedy, solver_s, len(starts), len(solutions))


def _cuts(graph: Graph, groups: Sequence[Group], roots: dict[str, str], free: set[str]) -> list[int]:
    """Positions p (a cut before node p) with no greedy group on both sides and at most
    MAX_CROSSING tensors written before p and read from p on."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    straddled = np.zeros(len(graph.nodes) + 1, dtype=int)
    for g in groups:
        lo, hi = min(order[m] for m in g.nodes), max(order[m] for m in g.nodes)
        straddled[lo + 1:hi + 1] += 1
    born: dict[str, int] = {}
    last_read: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        for t in node.inputs:
            if t and roots[t] not in free:
                last_read[roots[t]] = i
        for o in node.outputs:
            born.setdefault(roots[o], i)
    crossing = np.zeros(len(graph.nodes) + 1, dtype=int)
    for t, b in born.items():
        if t in last_read and last_read[t] > b:
            crossing[b + 1:last_read[t] + 1] += 1
    return [p for p in range(1, len(graph.nodes)) if not straddled[p] and crossing[p] <= MAX_CROSSING]


def _required(graph: Graph, roots: dict[str, str], free: set[str], segment_of: np.ndarray,
              producer: dict[str, tuple[int, int]]) -> list[set[str]]:
    """Per segment: the tensors it writes that a graph output or a later segment reads."""
    required: list[set[str]] = [set() for _ in range(int(segment_of[-1]) + 1 if len(segment_of) else 1)]
    for name in graph.outputs:
        if roots[name] not in free:
            required[int(segment_of[producer[roots[name]][0]])].add(roots[name])
    for i, node in enumerate(graph.nodes):
        for t in node.inputs:
            if t and roots[t] not in free:
                s = int(segment_of[producer[roots[t]][0]])
                if s != int(segment_of[i]):
                    required[s].add(roots[t])
    return required


def _solve(cands: list[Candidate], cost: list[float | None], required: set[str | None],
           local: Callable[[str], str | None], time_limit_s: float, min_gain: float) -> list[int]:
    """Positions of the chosen candidates of one segment (tensors named by `local`)."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # here: importing tilegraph stays quick

    n = len(cands)
    if n == 0:
        return []
    writers: dict[str, list[int]] = {}
    for p, c in enumerate(cands):
        for t in c.produces:
            if (name := local(t)) is not None:
                writers.setdefault(name, []).append(p)
    rows: list[np.ndarray] = []
    lower: list[float] = []
    for t in sorted(x for x in required if x is not None):
        row = np.zeros(n)
        row[writers.get(t, [])] = 1.0
        rows.append(row)
        lower.append(1.0)
    for p, c in enumerate(cands):
        for t in c.needs:
            name = local(t)
            if name is None:
                continue  # written by an earlier segment
            row = np.zeros(n)
            row[writers.get(name, [])] = 1.0
            row[p] -= 1.0
            rows.append(row)
            lower.append(0.0)
    matrix = np.array(rows) if rows else np.zeros((0, n))
    greedy = np.array([1.0 if c.greedy else 0.0 for c in cands])
    greedy_ok = bool(np.all(matrix @ greedy >= np.array(lower) - 1e-9))  # every greedy group of it was built
    c = np.array(cost, dtype=float) * 1e6  # microseconds: well-scaled for HiGHS
    constraints = LinearConstraint(matrix, np.array(lower), np.inf) if rows else ()
    result = milp(c, constraints=constraints, integrality=np.ones(n), bounds=Bounds(0, 1),
                  options={"time_limit": time_limit_s})
    picked = [p for p in range(n) if result.x is not None and result.x[p] > 0.5]
    if greedy_ok and (result.x is None or c[picked].sum() > (c @ greedy) * (1 - min_gain)):
        picked = [p for p in range(n) if greedy[p]]  # no gain above the noise, or HiGHS out of time
    elif result.x is None:
        raise GraphError(f"orchestration: no set of built kernels computes this segment ({result.message})")
    return picked


__all__ = ["Orchestration", "orchestrate", "view_roots", "MAX_CROSSING"]
