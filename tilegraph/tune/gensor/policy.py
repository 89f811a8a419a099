"""Roller's construction policy on our states (the tree baseline, also Gensor's seeds), and the
shared search setup.

    setup = SearchSetup.create(wl, hw, config)       # space, model, minimal state, graph
    roller_construct(setup, k=8)                     # up to k rPrograms, best model time first

Scale-up: from the minimal state, level by level (reg -> l1 -> l2), repeatedly take the enlarge
(and, at l1, rstep-up) edge with the highest data-reuse score; a level ends when no feasible edge
saves traffic. The first two choices of every level branch over the two best axes, so the policy
yields several programs (a tree of greedy paths). Scale-out: pick how many outer loops run in
parallel, shrink l2 along the axis that costs least until every core has work, pick the unroll;
all by the model. Never undoes a step: that is what the graph search adds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilegraph.te.workload import Workload
from tilegraph.tune.gensor.markov import ConstructionGraph, MarkovConfig
from tilegraph.tune.gensor.perf_model import PerfModel
from tilegraph.tune.gensor.state import EtirState, IterSpace, minimal_state, packable_operands, parallel_tasks
from tilegraph.tune.gensor.transitions import UNROLLS, Edge, feasible
from tilegraph.tune.hardware import HardwareModel

LEVELS = ("reg", "l1", "l2")
BRANCH_STEPS = 2
MAX_RESULTS_FACTOR = 4


@dataclass
class SearchSetup:
    workload: Workload
    space: IterSpace
    hw: HardwareModel
    model: PerfModel
    minimal: EtirState
    graph: ConstructionGraph

    @staticmethod
    def create(workload: Workload, hw: HardwareModel, config: MarkovConfig | None = None,
               dot_group: int = 0) -> SearchSetup:
        """`dot_group`: the K grouping of packed copies every state carries (EtirState.dot_group)."""
        space = IterSpace.from_workload(workload)
        model = PerfModel(space, hw)
        minimal = replace(minimal_state(space, hw.simd_lanes_fp32), dot_group=dot_group)
        graph = ConstructionGraph(space, hw, model, minimal, config or MarkovConfig(), packable_operands(space))
        return SearchSetup(workload, space, hw, model, minimal, graph)


def _scale_up_edges(setup: SearchSetup, s: EtirState, level: str) -> list[tuple[float, Edge]]:
    scored = []
    for e in setup.graph.edges(s):
        grows = e.kind == "enlarge" and e.level == level
        deeper_k = level == "l1" and e.kind == "rstep" and e.label.endswith("up)")
        if grows or deeper_k:
            score = setup.model.reuse_score(s, e.target, level)
            if score > 0:
                scored.append((score, e))
    scored.sort(key=lambda t: (-t[0], t[1].label))
    return scored


def scale_out(setup: SearchSetup, s: EtirState) -> EtirState:
    """Parallelise over the cores: choose the parallel depth, shrink l2 until all cores work, set unroll."""
    model, space, hw = setup.model, setup.space, setup.hw
    best = min((replace(s, parallel=p) for p in range(1, space.num_spatial + 1)), key=model.predict)
    for _ in range(32):
        if parallel_tasks(space, best) >= hw.cores:
            break
        shrunk = [e.target for e in setup.graph.edges(best) if e.kind == "shrink" and e.level == "l2"]
        if not shrunk:
            break
        best = min(shrunk, key=model.predict)
        best = min((replace(best, parallel=p) for p in range(1, space.num_spatial + 1)), key=model.predict)
    options = [replace(best, unroll=u) for u in UNROLLS if not best.rstep or best.rstep[-1] % u == 0]
    options = [o for o in options if feasible(space, hw, o, setup.minimal) is None] or [best]
    return min(options, key=model.predict)


def roller_construct(setup: SearchSetup, k: int = 8) -> list[EtirState]:
    """Roller's tree construction: up to k distinct programs, best predicted first."""
    results: list[EtirState] = []
    limit = MAX_RESULTS_FACTOR * k

    def grow(s: EtirState, level_index: int, steps: int) -> None:
        if len(results) >= limit:
            return
        if level_index == len(LEVELS):
            results.append(scale_out(setup, s))
            return
        scored = _scale_up_edges(setup, s, LEVELS[level_index])
        if not scored:
            grow(s, level_index + 1, 0)
            return
        width = 2 if steps < BRANCH_STEPS else 1
        for _, e in scored[:width]:
            grow(e.target, level_index, steps + 1)

    grow(setup.minimal, 0, 0)
    unique = list(dict.fromkeys(results))
    unique.sort(key=lambda st: (setup.model.predict(st), repr(st)))
    return unique[:k]


__all__ = ["SearchSetup", "roller_construct", "scale_out"]
