"""RayBuilder: the Builder protocol (tune/builder.py) over Ray tasks on the runners' nodes.

    builder = RayBuilder(connection, target, timeout_s=60, nodes=lambda: runner.nodes)
    results = builder.build([MeasureInput(wl, trace_json), ...])   # one BuildResult each, in order

Each candidate compiles in a stateless task on one of `nodes()` (those whose runners match the
target, so the toolchain is the target's) and comes back with its library's bytes. The driver
hands a build to a node only when one of its CPUs is free (dynamic: a node that finishes early
takes the next candidate; a queue fixed up front would wait for the node with the slowest
builds), and the deadline starts then. A build past its timeout is cancelled (its worker
killed): "build_timeout". A task lost with its node is built again on another node, at most
MAX_ATTEMPTS times in all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from tilegraph.stages import add as add_stage
from tilegraph.tune.builder import kernel_of
from tilegraph.tune.cluster.connect import ClusterError, Connection
from tilegraph.tune.cluster.remote import build_task, warm_task
from tilegraph.tune.measure import MeasureInput
from tilegraph.tune.result import BuildResult

MAX_ATTEMPTS = 3
START_GRACE_S = 60.0  # a cold worker's imports are no candidate's build time
_WAIT_S = 0.2


class RayBuilder:
    def __init__(self, connection: Connection, target: Any, timeout_s: float, nodes: Callable[[], list[str]]):
        if timeout_s <= 0:
            raise ValueError(f"RayBuilder timeout_s must be positive, got {timeout_s}")
        self.ray, self.target, self.timeout_s, self.nodes = connection.ray, target, timeout_s, nodes
        self._next = 0
        self._warm = False
        self._warm_nodes()

    def _warm_nodes(self) -> None:
        """A task per node that imports the builder (fire and forget: the first batch starts warm)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        for node in self.nodes():
            warm_task(self.ray).options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()

    def _capacity(self) -> dict[str, int]:
        """Build slots per node that may build: its CPUs (a build task takes one; runners take none)."""
        cpus = {n["NodeID"]: int(n.get("Resources", {}).get("CPU", 0)) for n in self.ray.nodes() if n.get("Alive")}
        return {node: cpus[node] for node in self.nodes() if cpus.get(node, 0) >= 1}

    def _submit(self, inp: MeasureInput, node: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return (build_task(self.ray).options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                .remote(inp.workload, inp.trace_json, self.target, self.timeout_s))

    def _free_node(self, capacity: dict[str, int], busy: dict[str, int], avoid: set[str]) -> str | None:
        """The node with the most free build slots, one not in `avoid` while any other is alive; None if
        the candidate has to wait for a slot."""
        free = [node for node in capacity if busy[node] < capacity[node]]
        if set(capacity) - avoid:
            free = [node for node in free if node not in avoid]
        if not free:
            return None
        self._next += 1  # ties rotate, so equal nodes share the work
        turn = self._next % len(free)
        return max(free[turn:] + free[:turn], key=lambda node: capacity[node] - busy[node])

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Builds `inputs`, each as soon as a node has a free CPU (a slow build does not hold back the
        others queued behind it), a lost one again on another node; results in order."""
        capacity = self._capacity() if inputs else {}
        if inputs and not capacity:
            raise ClusterError("no node with a runner for the target and a CPU to build on is left on the cluster")
        results: list[BuildResult | None] = [None] * len(inputs)
        failed_on: list[set[str]] = [set() for _ in inputs]
        limit = self.timeout_s + (0.0 if self._warm else START_GRACE_S)
        busy = dict.fromkeys(capacity, 0)
        pending = list(range(len(inputs)))
        flying: dict[Any, tuple[int, str, float]] = {}  # object ref -> (input, node, deadline)
        while pending or flying:
            for n in list(pending):
                node = self._free_node(capacity, busy, failed_on[n])
                if node is not None:
                    pending.remove(n)
                    busy[node] += 1
                    flying[self._submit(inputs[n], node)] = (n, node, time.monotonic() + limit)
            if not flying:  # every node that could build is gone
                for n in pending:
                    results[n] = BuildResult(False, "build_error", "build lost on the cluster: no node left to build on")
                break
            ready, _ = self.ray.wait(list(flying), num_returns=1, timeout=_WAIT_S)
            for ref in ready:
                n, node, _deadline = flying.pop(ref)
                busy[node] -= 1
                try:
                    results[n] = self.ray.get(ref)
                except Exception as e:  # build_candidate never raises: the task's worker or node was lost
                    failed_on[n].add(node)
                    alive = set(self.nodes())
                    for gone in set(capacity) - alive:
                        del capacity[gone]
                    if len(failed_on[n]) < MAX_ATTEMPTS and capacity:
                        pending.insert(0, n)
                    else:
                        first = (str(e).strip().splitlines() or [""])[0][:300]
                        results[n] = BuildResult(False, "build_error", f"build lost on the cluster: "
                                                 f"{type(e).__name__}: {first}")
            now = time.monotonic()
            for ref, (n, node, deadline) in list(flying.items()):
                if now > deadline:
                    del flying[ref]
                    busy[node] -= 1
                    self.ray.cancel(ref, force=True)
                    results[n] = BuildResult(False, "build_timeout",
                                             f"build did not return within {self.timeout_s:g} s; cancelled")
        self._warm = True
        out = [r if r is not None else BuildResult(False, "build_error", "not built") for r in results]
        for r in out:  # the tasks' stages, for the pipeline profile of whoever records
            for name, seconds in r.stages.items():
                add_stage(f"build.{name}", seconds)
        return out

    def kernel(self, workload: Any, trace_json: str, meta: dict[str, Any] | None = None) -> Any:
        """The kernel of a recorded schedule, built in this process: what tg.tune returns."""
        return kernel_of(workload, trace_json, self.target)

    def close(self) -> None:
        pass


__all__ = ["RayBuilder"]
