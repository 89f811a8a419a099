"""What runs on the cluster's nodes: the build task and the runner actor. Defined on first use
(they need Ray, which only a cluster run imports).

    build = build_task(ray).options(...).remote(workload, trace_json, target, timeout_s)
    actor = runner_actor(ray).options(...).remote(target, policy)
    result = actor.measure_candidate.remote(build, inputs, references, timeout_s, best_s)

A build returns the library's bytes (the runner may be on another machine); the runner writes
them into its node's cache folder, checks and times the candidate in its own child process
(tune/runner.py), so a crashing or hanging candidate costs that process, not the actor, and then
removes the file. Results carry the node that measured them.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from tilegraph.config import cache_dir
from tilegraph.tune.result import BuildResult


def with_library(build: BuildResult) -> BuildResult:
    """`build` carrying its library's bytes, and its packing kernel's (a failed build or one
    without a library: unchanged)."""
    if not build.ok or build.lib_path is None or build.loader != "runtime":
        return build
    prepack = None if build.prepack is None else (build.prepack[0], with_library(build.prepack[1]))
    return replace(build, library=Path(build.lib_path).read_bytes(), prepack=prepack)


def materialised(build: BuildResult, folder: Path | None = None) -> BuildResult:
    """`build` with its shipped library written here and lib_path pointing at it. The file is this
    process's own (its digest and pid name it), so `discarded` may remove it while another runner
    on the machine (a second node, a second slot) loads the same library from its own copy."""
    if build.library is None:
        return build
    if build.prepack is not None:
        build = replace(build, prepack=(build.prepack[0], materialised(build.prepack[1], folder)))
    folder = folder or cache_dir() / "cluster"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(build.library).hexdigest()[:24]}.{os.getpid()}.so"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(build.library)
        os.replace(tmp, path)
    return replace(build, lib_path=str(path), library=None)


def discarded(shipped: BuildResult, local: BuildResult) -> None:
    """Removes the file `materialised` wrote for `shipped` once its candidate is measured: every
    measurement brings the library's bytes again, so a long run leaves no library per candidate on
    the node's disk (a loaded library stays mapped in the process that loaded it)."""
    if shipped.library is not None and local.lib_path is not None:
        Path(local.lib_path).unlink(missing_ok=True)
    if shipped.prepack is not None and local.prepack is not None:
        discarded(shipped.prepack[1], local.prepack[1])


@functools.cache
def build_task(ray: ModuleType) -> Any:
    @ray.remote(num_cpus=1, max_retries=0)
    def build_on_node(workload: Any, trace_json: str, target: Any, timeout_s: float) -> BuildResult:
        from tilegraph.tune.builder import build_candidate

        return with_library(build_candidate(workload, trace_json, target, timeout_s))

    return build_on_node


@functools.cache
def warm_task(ray: ModuleType) -> Any:
    @ray.remote(num_cpus=1, max_retries=0)
    def warm_builder() -> None:
        """Imports what a build needs, so the node's first build task finds a warm worker."""
        import tilegraph.driver  # noqa: F401
        import tilegraph.tune.builder  # noqa: F401

    return warm_builder


@functools.cache
def runner_actor(ray: ModuleType) -> Any:
    @ray.remote(num_cpus=0, max_restarts=0)
    class RunnerActor:
        """One measurement slot on one node. The node's measurement lock (tune/runner.py) keeps two
        slots on one machine from timing at once."""

        def __init__(self, target: Any, policy: Any):
            from tilegraph.tune.cluster.fingerprint import calibrate, node_fingerprint
            from tilegraph.tune.runner import Runner

            self.node = ray.get_runtime_context().get_node_id()
            self.info = {**node_fingerprint(target), "node": self.node, "pid": os.getpid(),
                         "calibration_gflops": calibrate()}
            self.runner = Runner(policy, target=target)
            self.runner.warm()  # the child's start-up (imports) while the driver builds the first batch

        def fingerprint(self) -> dict[str, Any]:
            return self.info

        def measure_candidate(self, build: BuildResult, inputs: list[Any], references: list[Any], timeout_s: float | None,
                    best_s: float | None) -> Any:
            local = materialised(build)
            try:
                result = self.runner.run_on(local, inputs, references, timeout_s, best_s)
            finally:
                discarded(build, local)
            return replace(result, node=self.node)

    return RunnerActor


__all__ = ["build_task", "discarded", "materialised", "runner_actor", "warm_task", "with_library"]
