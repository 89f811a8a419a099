"""RayRunner: the Runner protocol (tune/runner.py) over runner actors on a Ray cluster.

    runner = RayRunner(connect("auto"), policy, target="cpu")   # one actor per matching node
    results = runner.run_batch([(build, inputs, references, timeout_s, best_s), ...])  # spread, in order
    runner.run_on(build, inputs, references)                    # one candidate

The driver draws the inputs and float64 references (as the local runner does); each actor checks
and times in its own child process. An actor or node that dies mid-measurement loses nothing: its
candidate goes to another runner (at most MAX_ATTEMPTS times), and the run goes on while one
runner is left; with none left, ClusterError (the batch is not recorded, so a later run measures
it). An actor that does not answer within the candidate's timeout plus ACTOR_GRACE_S
(its child should have been killed at the timeout) is killed and its candidate re-queued.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from tilegraph.stages import add as add_stage
from tilegraph.stages import stage
from tilegraph.tune.cluster.connect import ClusterError, Connection
from tilegraph.tune.cluster.fingerprint import match_key, node_fingerprint
from tilegraph.tune.cluster.remote import runner_actor
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.result import BuildResult, RunResult
from tilegraph.tune.runner import ReferenceFn, Runner, run_seeded

MAX_ATTEMPTS = 3
ACTOR_GRACE_S = 30.0
START_TIMEOUT_S = 180.0
_WAIT_S = 0.5

log = logging.getLogger("tilegraph.tune.cluster")

Item = tuple[BuildResult, Sequence[Any], Sequence[Any], float | None, float | None]


class RayRunner:
    def __init__(self, connection: Connection, policy: MeasurePolicy | None = None,
                 reference: ReferenceFn | None = None, target: Any = "cpu", slots_per_node: int = 1):
        self.ray = connection.ray
        self.policy = (policy or MeasurePolicy()).resolved()
        self.target = target
        self._local = Runner(self.policy, reference, target=target)  # references and final checks, here
        self.fingerprint = node_fingerprint(target)
        self.actors: list[Any] = []
        self.runners: list[dict[str, Any]] = []  # each matching runner's fingerprint and calibration
        self.skipped: list[dict[str, Any]] = []  # runners whose node differs from the driver's
        self.requeued = 0
        self._node_of: dict[int, str] = {}
        self._turn = 0  # candidates dispatched so far: whose turn it is to take the next one
        self._start(connection.nodes(), slots_per_node)

    def _start(self, nodes: list[str], slots_per_node: int) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor_class = runner_actor(self.ray)
        started = [actor_class.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                   .remote(self.target, self.policy) for node in nodes for _ in range(slots_per_node)]
        infos: list[Any] = []
        for actor in started:
            try:
                infos.append(self.ray.get(actor.fingerprint.remote(), timeout=START_TIMEOUT_S))
            except Exception:
                infos.append(None)
        want = match_key(self.fingerprint)
        for actor, info in zip(started, infos):
            if info is not None and match_key(info) == want:
                self.actors.append(actor)
                self._node_of[id(actor)] = info["node"]
                self.runners.append(info)
                continue
            if info is not None:
                self.skipped.append(info)
            self.ray.kill(actor)
        if not self.actors:
            seen = ", ".join(sorted({f"{i['host']}: {i['target']}" for i in self.skipped})) or "none answered"
            raise ClusterError(f"no runner on the cluster matches target {want[0]} on machine {want[1]} "
                               f"(tilegraph {want[2]}); "
                               f"{len(nodes)} node(s): {seen}")

    @property
    def slots(self) -> int:
        return len(self.actors)

    @property
    def nodes(self) -> list[str]:
        """The nodes of the runners still alive (where builds go)."""
        return sorted({self._node_of[id(a)] for a in self.actors})

    # ------------------------------------------------------------------ the Runner protocol
    def references(self, workload: Any, inputs: Sequence[Any]) -> list[Any]:
        return self._local.references(workload, inputs)

    def prepare(self, workload: Any, seed: int) -> tuple[list[Any], list[Any]]:
        return self._local.prepare(workload, seed)

    def check_here(self, kernel: Any, inputs: Sequence[Any], references: Sequence[Any],
                   storage: Sequence[tuple[int, ...]] | None = None) -> RunResult:
        return self._local.check_here(kernel, inputs, references, storage)

    def run(self, workload: Any, build: BuildResult, seed: int, timeout_s: float | None = None,
            best_s: float | None = None) -> RunResult:
        return run_seeded(self, workload, build, seed, timeout_s, best_s)

    def run_on(self, build: BuildResult, inputs: Sequence[Any], references: Sequence[Any],
               timeout_s: float | None = None, best_s: float | None = None) -> RunResult:
        with stage("run"):
            return self.run_batch([(build, inputs, references, timeout_s, best_s)])[0]

    def run_batch(self, items: Sequence[Item]) -> list[RunResult]:
        """Measure every item on the runners, as many at once as there are runners; results in order."""
        if not self.actors:
            raise ClusterError("every runner on the cluster was lost; nothing more can be measured")
        results: list[RunResult | None] = [None] * len(items)
        queue: list[int] = []
        for n, (build, *_rest) in enumerate(items):
            if build.ok:
                queue.append(n)
            else:
                results[n] = RunResult(build.error_kind or "build_error", build.message)
        attempts = [0] * len(items)
        # Idle runners in turn from where the last batch stopped: the search loop often hands over
        # one candidate at a time (builds finishing one by one), and a fixed order would give every
        # such candidate to the first runner while the others stay idle.
        first = self._turn % len(self.actors)
        idle = self.actors[first:] + self.actors[:first]
        flying: dict[Any, tuple[int, Any, float]] = {}  # object ref -> (item, actor, deadline)
        shipped = {n: self.ray.put(items[n][0]) for n in queue}
        while queue or flying:
            while queue and idle:
                n, actor = queue.pop(0), idle.pop(0)
                _, inputs, references, timeout_s, best_s = items[n]
                limit = self.policy.timeout_s if timeout_s is None else min(self.policy.timeout_s, timeout_s)
                ref = actor.measure_candidate.remote(shipped[n], list(inputs), list(references), timeout_s, best_s)
                flying[ref] = (n, actor, time.monotonic() + limit + ACTOR_GRACE_S)
                attempts[n] += 1
                self._turn += 1
            if not flying:
                break  # nothing in flight and no runner left for the queue
            ready, _ = self.ray.wait(list(flying), num_returns=1, timeout=_WAIT_S)
            for ref in ready:
                n, actor, _deadline = flying.pop(ref)
                try:
                    results[n] = self.ray.get(ref)
                    idle.append(actor)
                except Exception as e:  # the actor or its node died: the candidate goes elsewhere
                    self._lost(actor, n, e, attempts, queue, results)
            now = time.monotonic()
            for ref, (n, actor, deadline) in list(flying.items()):
                if now > deadline:  # the actor itself hangs: kill it, the candidate goes elsewhere
                    del flying[ref]
                    self.ray.kill(actor)
                    self._lost(actor, n, TimeoutError("no answer"), attempts, queue, results)
            if queue and not idle and not flying:
                break
        if queue:  # nothing recorded for this batch: a later run measures it (resumes) on a healthy cluster
            raise ClusterError(f"every runner on the cluster was lost; {len(queue)} candidate(s) of this batch "
                               "were not measured (nothing of the batch is recorded)")
        out = [r if r is not None else RunResult("run_error", "not measured") for r in results]
        for r in out:  # the actors' stages, for the pipeline profile of whoever records
            for name, seconds in r.stages.items():
                add_stage(f"run.{name}", seconds)
        return out

    def _lost(self, actor: Any, n: int, error: BaseException, attempts: list[int], queue: list[int],
              results: list[RunResult | None]) -> None:
        if actor in self.actors:
            self.actors.remove(actor)
        if not self.actors:  # the last one: the batch ends in ClusterError, nothing of it recorded
            queue.insert(0, n)
        elif attempts[n] < MAX_ATTEMPTS:
            self.requeued += 1
            queue.insert(0, n)
            log.warning("a runner was lost (%s); its candidate goes to another (%d left)", type(error).__name__,
                        len(self.actors))
        else:  # it outlived MAX_ATTEMPTS runners: recorded as the candidate's failure
            first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
            results[n] = RunResult("run_error", f"its runner was lost ({type(error).__name__}: {first})")

    def close(self) -> None:
        for actor in self.actors:
            try:
                self.ray.kill(actor)
            except Exception:
                pass
        self.actors = []
        self._local.close()


__all__ = ["RayRunner"]
