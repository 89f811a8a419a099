"""Builder: compile a batch of candidates in parallel worker processes ("spawn" context).

    with Builder(max_workers=2, timeout_s=60) as builder:
        results = builder.build([MeasureInput(wl, trace_json), ...])   # one BuildResult each, in order
        kernel = builder.kernel(wl, trace_json)                         # the final kernel, in this process

The protocol tg.tune uses (TuneOptions.builder injects another implementation): build, kernel, close.

A ScheduleError, a lowering or compiler error, a worker that dies, or a build that runs past its
timeout becomes BuildResult(ok=False, error_kind="build_error" | "build_timeout", message): a bad
candidate never stops tuning. A worker stuck past its timeout is killed and the pool replaced.
What a built kernel ships to the runner, per target, is tune/kernel_loader.py's describe_kernel.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from tilegraph.stages import add as add_stage
from tilegraph.stages import recording, stage
from tilegraph.te.workload import Workload
from tilegraph.tune.measure import MeasureInput, die_with_parent, resolve_target, spawn_without_main
from tilegraph.tune.result import ArgSpec, BuildResult

_POLL_S = 0.05
# A worker that ignores its own alarm (stuck in native code) is killed this long after its timeout.
_HARD_KILL_GRACE_S = 5.0


class _BuildTimeout(Exception):
    pass


def workload_args(workload: Workload) -> tuple[ArgSpec, ...]:
    specs = [ArgSpec(t.name, tuple(t.shape), t.dtype.array_numpy.name, False, i in workload.constants)
             for i, t in enumerate(workload.inputs)]
    specs += [ArgSpec(t.name, tuple(t.shape), t.dtype.array_numpy.name, True) for t in workload.outputs]
    return tuple(specs)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:2000]


def build_candidate(workload: Workload, trace_json: str, target: Any, timeout_s: float) -> BuildResult:
    """Runs in a worker process. Never raises: every failure is a BuildResult."""
    start = time.perf_counter()

    def on_alarm(signum: int, frame: Any) -> None:
        raise _BuildTimeout()

    # an alarm needs the main thread (a Ray task may run elsewhere; its driver cancels it past the timeout)
    use_alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if use_alarm:
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    with recording() as seconds:  # replay, lower, print, compile: the pipeline profile's build stages
        try:
            from tilegraph.driver import build
            from tilegraph.schedule import Schedule
            from tilegraph.tune.kernel_loader import describe_kernel
            from tilegraph.tune.prepacked import prepacked_build

            with stage("replay"):
                sch = Schedule.replay(workload, trace_json)
            tgt = resolve_target(target)
            result = prepacked_build(sch, workload, tgt, workload_args(workload), start)
            if result is None:
                kernel = build(sch, target=tgt)
                result = describe_kernel(kernel, tgt, workload_args(workload), time.perf_counter() - start)
        except _BuildTimeout:
            result = BuildResult(False, "build_timeout", f"build took longer than {timeout_s:g} s",
                                 build_time_s=time.perf_counter() - start)
        except Exception as e:  # every failure of one candidate is data, not a reason to stop
            result = BuildResult(False, "build_error", _one_line(e), build_time_s=time.perf_counter() - start)
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
    return dataclasses.replace(result, stages=dict(seconds))


def kernel_of(workload: Workload, trace_json: str, target: Any) -> Any:
    """The kernel of a recorded schedule, built in this process (the build cache makes it cheap)."""
    from tilegraph.driver import build
    from tilegraph.schedule import Schedule

    return build(Schedule.replay(workload, trace_json), target=resolve_target(target))


class Builder:
    def __init__(self, max_workers: int | None = None, timeout_s: float = 60.0, target: Any = "cpu"):
        if timeout_s <= 0:
            raise ValueError(f"Builder timeout_s must be positive, got {timeout_s}")
        self.max_workers = max_workers or max(1, min(4, os.cpu_count() or 1))
        if self.max_workers < 1:
            raise ValueError(f"Builder max_workers must be >= 1, got {max_workers}")
        self.timeout_s = timeout_s
        self.target = target
        self._pool: cf.ProcessPoolExecutor | None = None
        self._warm = False
        self._broken = False

    def _ensure_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.max_workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=die_with_parent)
        return self._pool

    def _kill_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            if proc.is_alive():
                proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every candidate; the result list is in input order."""
        results = self._build_all(inputs)
        for r in results:  # the workers' stages, for the pipeline profile of whoever records
            for name, seconds in r.stages.items():
                add_stage(f"build.{name}", seconds)
        return results

    def _build_all(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        if not inputs:
            return []
        pool = self._ensure_pool()
        futures: list[cf.Future] = []
        try:
            for inp in inputs:
                with spawn_without_main():  # the pool starts its workers on submit
                    futures.append(pool.submit(build_candidate, inp.workload, inp.trace_json, self.target,
                                               self.timeout_s))
        except cf.BrokenExecutor:
            self._kill_pool()
            return [BuildResult(False, "build_error", "the build worker pool broke; candidate not built")] * len(inputs)
        results: list[BuildResult | None] = [None] * len(futures)
        started: dict[int, float] = {}
        # Spawn start-up is not part of any candidate's build time.
        startup_grace = 30.0
        t_submit = time.monotonic()
        stuck = False
        while any(r is None for r in results):
            now = time.monotonic()
            for n, fut in enumerate(futures):
                if results[n] is not None:
                    continue
                if fut.done():
                    results[n] = self._collect(fut)
                elif fut.running():
                    started.setdefault(n, max(now, t_submit + (0 if self._warm else startup_grace)))
                    if now - started[n] > self.timeout_s + _HARD_KILL_GRACE_S:
                        results[n] = BuildResult(False, "build_timeout",
                                                 f"build worker did not return within {self.timeout_s:g} s; killed")
                        stuck = True
            if stuck and all(r is not None or not fut.running() for r, fut in zip(results, futures)):
                break
            time.sleep(_POLL_S)
        self._warm = True
        if self._broken:
            self._broken = False
            self._kill_pool()
        if stuck:
            self._kill_pool()
            # candidates that never started go to a fresh pool
            pending = [n for n, r in enumerate(results) if r is None]
            if pending:
                redo = self._build_all([inputs[n] for n in pending])
                for n, r in zip(pending, redo):
                    results[n] = r
        return [r for r in results if r is not None]

    def kernel(self, workload: Workload, trace_json: str, meta: dict[str, Any] | None = None) -> Any:
        """The kernel of a recorded schedule, built in this process (the build cache makes it cheap):
        what tg.tune returns. `meta` is the record's (a builder that builds from it may use it)."""
        return kernel_of(workload, trace_json, self.target)

    def _collect(self, fut: cf.Future) -> BuildResult:
        try:
            return fut.result()
        except cf.BrokenExecutor as e:
            self._broken = True
            return BuildResult(False, "build_error", f"build worker died: {_one_line(e)}")
        except Exception as e:  # e.g. the candidate could not be pickled
            return BuildResult(False, "build_error", _one_line(e))

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._kill_pool()
        except Exception:
            pass
