"""orchestrate_kernels: compile_model's orchestration="blp" path: candidates built and measured,
then the binary linear program picks the kernels.

    specs, built, report = orchestrate_kernels(graph, groups, target, db, workers, progress)

1. The greedy groups are built (each anchor from its best database record, else its default
   schedule, as in the greedy path) and measured (fusion/measure.py: through the one measurer,
   checked against the graph's float64 meaning, timed in the isolated runner, recorded).
2. Every other candidate (fusion.candidates) is estimated by the roofline first; one whose
   estimate already reaches the measured time of the greedy group it splits cannot pay off and is
   not built. The rest are built (identical workloads once: 12 transformer layers, one build
   each) and measured; one that fails to build, fails its check, crashes or hangs is left out.
3. fusion.orchestrate solves the program; its chosen candidates become the model's kernels.
4. Where the choice leaves the greedy fusion, the kernels that differ are timed again in
   alternating rounds (their records replaced, marked confirmed) and the program solved again: a
   departure is decided on costs measured apart in time, never on one record of a busy moment.

A graph with no candidate but the greedy groups has nothing to choose: nothing is measured.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilegraph.errors import GraphError, TilegraphError
from tilegraph.graph.compile_progress import stage
from tilegraph.graph.fusion.candidates import candidates
from tilegraph.graph.fusion.compose import group_spec
from tilegraph.graph.fusion.measure import CONFIRMED, candidate_measurer, fits_in_memory, hardware_for, roofline_seconds
from tilegraph.graph.fusion.orchestrate import Orchestration, orchestrate
from tilegraph.graph.fusion.partition import Group
from tilegraph.graph.ir import Graph
from tilegraph.graph.kernels import build_kernels
from tilegraph.graph.ops.registry import op_def
from tilegraph.runtime import threads
from tilegraph.target import Target

if TYPE_CHECKING:
    from tilegraph.tune.database import Database


@dataclass(frozen=True)
class OrchestrationReport:
    result: Orchestration
    candidates: int  # candidate kernels generated
    pruned: int  # skipped by the roofline estimate
    failed: int  # did not build, or failed their check (left out of the program)
    measured: int  # kernels measured now (the rest were recorded in the database)
    seconds: float  # building, timing and solving together
    failures: tuple[str, ...] = ()  # greedy groups that failed to build or their check, with why (left out)

    def summary(self) -> str:
        r = self.result
        return (f"BLP: {len(r.chosen)} kernels from {self.candidates} candidates ({self.pruned} pruned by the roofline, "
                f"{self.failed} failed, {self.measured} measured); measured sum {r.objective_s * 1e3:.2f} ms vs "
                f"greedy {r.greedy_s * 1e3:.2f} ms; {r.segments} segments, {r.distinct_segments} distinct, "
                f"HiGHS {r.solver_s:.2f} s; {self.seconds:.1f} s in all")


def orchestrate_kernels(graph: Graph, groups: list[Group], target: Target, db: Database | None, workers: int | None,
                        progress: Any) -> tuple[list[Any], dict[str, Any], OrchestrationReport]:
    start = time.perf_counter()
    cands = candidates(graph, groups)
    specs: list[Any] = []
    for c in cands:
        try:
            specs.append(group_spec(graph, c.group))
        except TilegraphError:
            specs.append(None)  # a composition fusion cannot express: not a candidate
    count = threads.configured_num_threads() or target.num_cores
    cost: list[float | None] = [None] * len(cands)
    errors: dict[str, Any] = {}
    built: dict[str, Any] = {}
    hw_cache: list[Any] = []

    def hardware() -> Any:
        if not hw_cache:
            hw_cache.append(hardware_for(target))
        return hw_cache[0]

    timed: set[int] = set()  # candidates whose cost was measured (not a roofline estimate)
    confirmed: set[str] = set()  # keys measured again apart from their first measurement
    greedy = [i for i, c in enumerate(cands) if c.greedy and specs[i] is not None]
    choice = any(not c.greedy and specs[i] is not None for i, c in enumerate(cands))
    with candidate_measurer(graph, target, db, count) as measure:

        def build_and_measure(ids: list[int]) -> None:
            built.update(build_kernels([specs[i] for i in ids], target, db, workers, progress, errors=errors))
            for i in ids:
                key = specs[i].key
                if key not in built or key in errors:
                    continue
                if not choice:
                    cost[i] = 1.0  # nothing to choose between: nothing to measure
                elif not fits_in_memory(specs[i].workload):
                    cost[i] = roofline_seconds(specs[i].workload, hardware(), count)
                else:
                    record = measure(specs[i], built[key].kernel)
                    if record.ok:  # the fastest sample: stalls of a shared machine only add time
                        cost[i] = record.latency_min_s or record.latency_s
                        timed.add(i)
                        if record.meta.get(CONFIRMED):
                            confirmed.add(key)
                    else:
                        errors[key] = GraphError(f"its check failed ({record.kind}: {record.message[:200]})")

        build_and_measure(greedy)
        owner = {}  # node -> measured seconds of the greedy group holding it
        for i in greedy:
            for m in cands[i].group.nodes:
                owner[m] = cost[i]
        rest, pruned = [], 0
        for i, c in enumerate(cands):
            if c.greedy or specs[i] is None:
                continue
            bound_to = owner.get(c.group.nodes[-1])
            if bound_to is not None:
                if roofline_seconds(specs[i].workload, hardware(), count) >= bound_to:
                    pruned += 1
                    continue
            rest.append(i)
        stage(progress, f"building and measuring the other {len(rest)} fusion candidates (kernels)")
        build_and_measure(rest)
        stage(progress, "choosing kernels (binary linear program)")
        keys = [s.key if s is not None else "" for s in specs]
        mode = os.environ.get(COSTS_ENV, "")
        _require_cover(graph, cands, cost, specs, errors)
        result = orchestrate(graph, groups, cands, keys, perturbed_costs(cost, cands, mode))
        for _ in range(MAX_CONFIRMATIONS):
            doubtful = _departures(result, cands, timed, keys) - confirmed
            if not doubtful:
                break
            stage(progress, f"timing again {len(doubtful)} kernels where the choice leaves the greedy fusion")
            _confirm(doubtful, specs, built, cost, errors, measure)
            confirmed |= doubtful
            _require_cover(graph, cands, cost, specs, errors)
            result = orchestrate(graph, groups, cands, keys, perturbed_costs(cost, cands, mode))
        measured = measure.session.measured
    by_id = {id(c): i for i, c in enumerate(cands)}
    chosen_specs = [specs[by_id[id(c)]] for c in result.chosen]
    failed = sum(1 for s in specs if s is None or s.key in errors)
    failures = tuple(f"{', '.join(cands[i].group.nodes)}: {errors[specs[i].key]}" for i in greedy
                     if specs[i].key in errors)
    report = OrchestrationReport(result, len(cands), pruned, failed, measured, time.perf_counter() - start,
                                 failures)
    return chosen_specs, built, report


def _departures(result: Orchestration, cands: list[Any], timed: set[int], keys: list[str]) -> set[str]:
    """Keys of the measured candidates where the choice and the greedy fusion differ: the chosen
    ones greedy does not have, and the greedy ones the choice leaves out."""
    chosen = {id(c) for c in result.chosen}
    return {keys[i] for i in timed if (id(cands[i]) in chosen) != cands[i].greedy}


def _confirm(doubtful: set[str], specs: list[Any], built: dict[str, Any],
             cost: list[float | None], errors: dict[str, Any], measure: Any) -> None:
    """Each doubtful kernel timed CONFIRM_ROUNDS more times, in alternating rounds, its cost (and
    record) the fastest of its first and these measurements: a choice that leaves greedy is made on costs
    measured apart in time (a record taken while the machine was busy would otherwise decide
    every later compile: QDQ ResNet-50 read fused convolutions recorded at 16 ms, run 0.2)."""
    ids: dict[str, list[int]] = {}
    for i, s in enumerate(specs):
        if s is not None and s.key in doubtful and cost[i] is not None:
            ids.setdefault(s.key, []).append(i)
    for _ in range(CONFIRM_ROUNDS):
        for key, members in ids.items():
            if key in errors:
                continue
            record = measure(specs[members[0]], built[key].kernel, fresh=True)  # keeps the fastest
            if not record.ok:
                errors[key] = GraphError(f"its check failed when timed again ({record.kind}: {record.message[:200]})")
            for i in members:
                cost[i] = (record.latency_min_s or record.latency_s) if record.ok else None


MAX_CONFIRMATIONS = 5  # solves after re-timing: each re-times only the departures not yet re-timed
CONFIRM_ROUNDS = 2

COSTS_ENV = "TILEGRAPH_BLP_COSTS"  # a test hook: "split" or "reversed" (perturbed_costs)


def perturbed_costs(cost: list[float | None], cands: list[Any], mode: str) -> list[float | None]:
    """The measured costs, or with TILEGRAPH_BLP_COSTS set a choice timings would not make: "split"
    makes every fused candidate a hundred times dearer (the program then splits wherever it may),
    "reversed" turns the order of the costs around. CI runs the suite once so, to catch any test
    that assumes which kernels a measured choice picks on the machine it was written on."""
    if mode == "split":
        return [None if c is None else c * (100.0 if len(cand.group.nodes) > 1 else 1.0) for c, cand in zip(cost, cands)]
    if mode == "reversed":
        known = [c for c in cost if c is not None]
        low, high = (min(known), max(known)) if known else (0.0, 0.0)
        return [None if c is None else high + low - c for c in cost]
    if mode:
        raise GraphError(f"{COSTS_ENV}={mode!r}: expected 'split' or 'reversed' (or unset)")
    return cost


def _require_cover(graph: Graph, cands: list[Any], cost: list[float | None], specs: list[Any],
                   errors: dict[str, Any]) -> None:
    """Every node that needs a kernel is in some candidate that built; else the build error of a
    candidate holding it (the greedy path raises the same), never a model missing a kernel."""
    covered = {m for c, seconds in zip(cands, cost) if seconds is not None for m in c.group.nodes}
    for node in graph.nodes:
        if node.name in covered or op_def(node.op).view:
            continue
        holding = [i for i, c in enumerate(cands) if node.name in c.group.nodes]
        alone = sorted(holding, key=lambda i: len(cands[i].group.nodes))
        why = next((errors[specs[i].key] for i in alone if specs[i] is not None and specs[i].key in errors), None)
        if isinstance(why, TilegraphError):
            raise why
        raise GraphError(f"node {node.name!r} ({node.op}): no kernel computing it could be built"
                         + (f" ({why})" if why else ""))


__all__ = ["orchestrate_kernels", "OrchestrationReport"]
