"""RayBuilder: the Builder protocol (tune/builder.py) over Ray tasks on the runners' nodes.

    builder = RayBuilder(connection, target, timeout_s=60, nodes=lambda: runner.nodes)
    results = builder.build([MeasureInput(wl, trace_json), ...])   # one BuildResult each, in order

Each candidate compiles in a stateless task on one of `nodes()` (round robin: those whose runners
match the target, so the toolchain is the target's) and comes back with its library's bytes. A
build past its timeout is cancelled (its worker killed): "build_timeout". A task lost with its
node is built again on another node, at most MAX_ATTEMPTS times in all.
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

    def _submit(self, inp: MeasureInput, avoid: set[str]) -> tuple[Any, str]:
        """The build task of `inp` on the next node (round robin), not one in `avoid` while others remain."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = self.nodes()
        nodes = [n for n in nodes if n not in avoid] or nodes
        node = nodes[self._next % len(nodes)]
        self._next += 1
        ref = (build_task(self.ray).options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
               .remote(inp.workload, inp.trace_json, self.target, self.timeout_s))
        return ref, node

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        if inputs and not self.nodes():
            raise ClusterError("no node with a runner for the target is left on the cluster to build on")
        results: list[BuildResult | None] = [None] * len(inputs)
        failed_on: list[set[str]] = [set() for _ in inputs]
        limit = self.timeout_s + (0.0 if self._warm else START_GRACE_S)
        flying: dict[Any, tuple[int, str, float]] = {}  # object ref -> (input, node, deadline)
        for n, inp in enumerate(inputs):
            ref, node = self._submit(inp, set())
            flying[ref] = (n, node, time.monotonic() + limit)
        while flying:
            ready, _ = self.ray.wait(list(flying), num_returns=len(flying), timeout=_WAIT_S)
            for ref in ready:
                n, node, _deadline = flying.pop(ref)
                try:
                    results[n] = self.ray.get(ref)
                except Exception as e:  # build_candidate never raises: the task's worker or node was lost
                    failed_on[n].add(node)
                    if len(failed_on[n]) < MAX_ATTEMPTS and self.nodes():
                        again, where = self._submit(inputs[n], failed_on[n])
                        flying[again] = (n, where, time.monotonic() + limit)
                    else:
                        first = (str(e).strip().splitlines() or [""])[0][:300]
                        results[n] = BuildResult(False, "build_error", f"build lost on the cluster: "
                                                 f"{type(e).__name__}: {first}")
            now = time.monotonic()
            for ref, (n, _node, deadline) in list(flying.items()):
                if now > deadline:
                    del flying[ref]
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
