"""orchestrate_kernels: compile_model's orchestration="blp" path: candidates built and measured,
then the binary linear program picks the kernels.

    specs, built, report = orchestrate_kernels(graph, groups, target, db, workers, progress)

1. The greedy groups are built (each anchor from its best database record, else its default
   schedule, as in the greedy path) and measured (fusion/measure.py: through the one measurer,
   checked against the graph's float64 meaning, timed in the isolated runner, recorded).
2. Every other candidate (fusion.candidates) is estimated by the roofline first; one whose
   estimate already reaches the measured time of the greedy group it splits cannot pay off and is
   not built. The rest are built and measured one per cost class (fusion/cost_class.py: 12
   transformer layers alike but for their quantization scales, one measurement); a class whose
   kernel fails to build, fails its check, crashes or hangs is left out.
3. fusion.orchestrate solves the program.
4. Where the choice leaves the greedy fusion, the kernels that differ are timed again in
   alternating rounds (their records replaced, marked confirmed) and the program solved again: a
   departure is decided on costs measured apart in time, never on one record of a busy moment.
5. The chosen candidates not built yet (their class measured through another) are built; they
   become the model's kernels.

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
from tilegraph.graph.fusion.cost_class import cost_class
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
    measured: int  # kernels measured now for the first time (the rest were recorded in the database)
    seconds: float  # building, timing and solving together
    failures: tuple[str, ...] = ()  # greedy groups that failed to build or their check, with why (left out)
    retimed: int = 0  # kernels timed again: where the choice left greedy, or far above their roofline

    def summary(self) -> str:
        r = self.result
        return (f"BLP: {len(r.chosen)} kernels from {self.candidates} candidates ({self.pruned} pruned by the roofline, "
                f"{self.failed} failed, {self.measured} measured, {self.retimed} timed again); "
                f"measured sum {r.objective_s * 1e3:.2f} ms vs "
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

    classes = [cost_class(graph, c.group) if specs[i] is not None else "" for i, c in enumerate(cands)]
    members: dict[str, list[int]] = {}
    for i, k in enumerate(classes):
        if k:
            members.setdefault(k, []).append(i)
    retimed = 0  # measurements of kernels already measured (confirmations), not counted as measured
    timed: set[int] = set()  # candidates whose cost was measured (not a roofline estimate)
    confirmed: set[str] = set()  # classes measured again apart from their first measurement
    greedy = [i for i, c in enumerate(cands) if c.greedy and specs[i] is not None]
    choice = any(not c.greedy and specs[i] is not None for i, c in enumerate(cands))
    with candidate_measurer(graph, target, db, count) as measure:

        def build_and_measure(ids: list[int]) -> None:
            """Costs of `ids`: one candidate of each class built and measured, its cost given to
            the class (every member left out when it fails)."""
            nonlocal retimed
            todo = [members[k][0] for k in dict.fromkeys(classes[i] for i in ids) if cost[members[k][0]] is None]
            todo = [i for i in todo if specs[i].key not in errors]
            built.update(build_kernels([specs[i] for i in todo], target, db, workers, progress, errors=errors))
            for i in todo:
                key = specs[i].key
                if key not in built or key in errors:
                    continue
                if not choice:
                    seconds: float | None = 1.0  # nothing to choose between: nothing to measure
                elif not fits_in_memory(specs[i].workload):
                    seconds = roofline_seconds(specs[i].workload, hardware(), count, target)
                else:
                    record = measure(specs[i], built[key].kernel)
                    if not record.ok:
                        errors[key] = GraphError(f"its check failed ({record.kind}: {record.message[:200]})")
                        continue
                    seconds = record.latency_min_s or record.latency_s  # the fastest: stalls only add time
                    if (not record.meta.get(CONFIRMED) and seconds > SUSPECT_MIN_S
                            and seconds > SUSPECT_OVER_ROOFLINE * roofline_seconds(specs[i].workload, hardware(),
                                                                                   count, target)):
                        record = measure(specs[i], built[key].kernel, fresh=True)  # keeps the fastest
                        retimed += 1
                        if not record.ok:
                            errors[key] = GraphError(f"its check failed when timed again ({record.kind}: "
                                                     f"{record.message[:200]})")
                            continue
                        seconds = record.latency_min_s or record.latency_s
                    timed.update(members[classes[i]])
                    if record.meta.get(CONFIRMED):
                        confirmed.add(classes[i])
                for j in members[classes[i]]:
                    cost[j] = seconds

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
                if roofline_seconds(specs[i].workload, hardware(), count, target) >= bound_to:
                    pruned += 1
                    continue
            rest.append(i)
        stage(progress, f"building and measuring the other {len(rest)} fusion candidates "
                        f"({len({classes[i] for i in rest})} distinct kernels)")
        build_and_measure(rest)
        stage(progress, "choosing kernels (binary linear program)")
        mode = os.environ.get(COSTS_ENV, "")
        _require_cover(graph, cands, cost, specs, errors)
        # classes as the program's keys: segments alike but for their constants are solved once
        result = orchestrate(graph, groups, cands, classes, perturbed_costs(cost, cands, mode))
        for _ in range(MAX_CONFIRMATIONS):
            doubtful = _departures(result, cands, timed, classes) - confirmed
            if doubtful:
                stage(progress, f"timing again {len(doubtful)} kernels where the choice leaves the greedy fusion")
                before = measure.session.measured
                _confirm([members[k][0] for k in sorted(doubtful)], members, classes, specs, built, cost, errors,
                         measure)
                retimed += measure.session.measured - before
                confirmed |= doubtful
            elif not _build_chosen(result, cands, specs, built, cost, errors, target, db, workers, progress):
                break  # confirmed and built
            _require_cover(graph, cands, cost, specs, errors)
            result = orchestrate(graph, groups, cands, classes, perturbed_costs(cost, cands, mode))
        else:
            if _build_chosen(result, cands, specs, built, cost, errors, target, db, workers, progress):
                why = list(errors.values())[-1]  # the last failure: this build's
                raise GraphError(f"orchestration: a chosen kernel failed to build where its class built ({why}); "
                                 "compile with orchestration='greedy'")
        measured = measure.session.measured - retimed
    by_id = {id(c): i for i, c in enumerate(cands)}
    chosen_specs = [specs[by_id[id(c)]] for c in result.chosen]

    def why_failed(i: int) -> Any:  # its own error, or its class's (measured through another member)
        if specs[i] is None:
            return "not expressible"
        return errors.get(specs[i].key) or errors.get(specs[members[classes[i]][0]].key)

    failed = sum(1 for i in range(len(cands)) if why_failed(i))
    failures = tuple(f"{', '.join(cands[i].group.nodes)}: {why_failed(i)}" for i in greedy if why_failed(i))
    report = OrchestrationReport(result, len(cands), pruned, failed, measured, time.perf_counter() - start,
                                 failures, retimed)
    return chosen_specs, built, report


def _departures(result: Orchestration, cands: list[Any], timed: set[int], classes: list[str]) -> set[str]:
    """Classes of the measured candidates where the choice and the greedy fusion differ: the
    chosen ones greedy does not have, and the greedy ones the choice leaves out."""
    chosen = {id(c) for c in result.chosen}
    return {classes[i] for i in timed if (id(cands[i]) in chosen) != cands[i].greedy}


def _confirm(representatives: list[int], members: dict[str, list[int]], classes: list[str], specs: list[Any],
             built: dict[str, Any], cost: list[float | None], errors: dict[str, Any], measure: Any) -> None:
    """Each doubtful class's measured kernel timed CONFIRM_ROUNDS more times, in alternating
    rounds, its cost (and record) the fastest of its first and these measurements: a choice that
    leaves greedy is made on costs measured apart in time (a record taken while the machine was
    busy would otherwise decide every later compile: QDQ ResNet-50 read fused convolutions
    recorded at 16 ms, run 0.2)."""
    for _ in range(CONFIRM_ROUNDS):
        for i in representatives:
            key = specs[i].key
            if key in errors:
                continue
            record = measure(specs[i], built[key].kernel, fresh=True)  # keeps the fastest
            if not record.ok:
                errors[key] = GraphError(f"its check failed when timed again ({record.kind}: {record.message[:200]})")
            for j in members[classes[i]]:
                cost[j] = (record.latency_min_s or record.latency_s) if record.ok else None


def _build_chosen(result: Orchestration, cands: list[Any], specs: list[Any], built: dict[str, Any],
                  cost: list[float | None], errors: dict[str, Any], target: Target, db: Database | None,
                  workers: int | None,
                  progress: Any) -> bool:
    """Builds the chosen kernels not built yet (measured through another member of their class);
    True when one failed (its cost is then dropped: the program must be solved again)."""
    by_id = {id(c): i for i, c in enumerate(cands)}
    missing = [by_id[id(c)] for c in result.chosen if specs[by_id[id(c)]].key not in built]
    if not missing:
        return False
    stage(progress, f"building {len(missing)} chosen kernels (their cost measured on a kernel of the same class)")
    built.update(build_kernels([specs[i] for i in missing], target, db, workers, progress, errors=errors))
    failed = [i for i in missing if specs[i].key in errors or specs[i].key not in built]
    for i in failed:
        cost[i] = None
    return bool(failed)


MAX_CONFIRMATIONS = 5  # solves after re-timing: each re-times only the departures not yet re-timed
CONFIRM_ROUNDS = 2
# A measured cost this many times its roofline (an estimate from below) is timed again once before it
# counts, its record then marked confirmed: a cost recorded while the machine was busy is read by
# every later compile, and a high one is never doubted otherwise (the choice only leaves it out).
# A bf16 ResNet-50's split convolution recorded at 7.99 ms (it runs 0.12) kept nine casts fused
# into their convolutions, recomputed at every read (17.3 ms against 13.9).
SUSPECT_OVER_ROOFLINE = 25.0
SUSPECT_MIN_S = 5e-5  # below this a kernel's launch alone is many roofline bounds: not doubted

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
