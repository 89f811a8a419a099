"""Runner: check and time built candidates (any target) in one isolated, persistent worker process.

    with Runner(MeasurePolicy(min_time_s=0.2)) as runner:
        result = runner.run(workload, build_result, seed=7)     # RunResult(kind="ok", samples=...)

For every candidate the parent draws fresh random inputs (a new seed per check) and the float64
reference; the worker rebuilds the kernel for its target (tune/kernel_loader.py: a CPU .so, an
OpenCL program from its source, a CUDA .so), poisons the outputs with NaN, runs the kernel once,
compares, and only then times it. A worker that dies (segfault) gives kind "crash", one that runs
past policy.timeout_s is killed and gives "timeout"; either way a fresh worker takes over and
tuning goes on. An exclusive lock file (fcntl.flock) in the cache folder keeps two tuning
processes from timing at once.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.config import cache_dir
from tilegraph.dtype import poisoned
from tilegraph.errors import TilegraphError
from tilegraph.runtime.host_memory import aligned_copy
from tilegraph.stages import add as add_stage
from tilegraph.stages import recording, stage
from tilegraph.te.dims import DIMS_INPUT
from tilegraph.te.workload import Workload
from tilegraph.tune.kernel_loader import load_kernel
from tilegraph.tune.measure import (
    MeasurePolicy,
    compare_outputs,
    constant_evictor,
    die_with_parent,
    library_reference,
    outputs_within_extents,
    random_inputs,
    spawn_without_main,
    time_runs,
    time_slow_candidate,
    valid_regions,
)
from tilegraph.tune.result import BuildResult, RunResult

ReferenceFn = Callable[[Workload, Sequence[np.ndarray]], Sequence[np.ndarray]]

_STARTUP_TIMEOUT_S = 120.0


def run_seeded(runner: Any, workload: Workload, build: BuildResult, seed: int, timeout_s: float | None,
               best_s: float | None) -> RunResult:
    """`runner.run`: the check's inputs drawn from `seed` and their reference, then `runner.run_on`
    (this one's, or another Runner-like object's such as tune/cluster/runner.py's)."""
    if not build.ok:
        return RunResult(build.error_kind or "build_error", build.message)
    with stage("inputs"):
        inputs = random_inputs(workload, seed)
    with stage("reference"):
        references = runner.references(workload, inputs)
    return runner.run_on(build, inputs, references, timeout_s, best_s)


class MeasureLockTimeout(TilegraphError):
    """Another process held the measurement lock for longer than we were willing to wait."""


# ---------------------------------------------------------------------------- worker process side
def _measure_in_worker(build: BuildResult, inputs: list[np.ndarray], references: list[np.ndarray],
                       policy: MeasurePolicy, best_s: float | None = None) -> RunResult:
    with recording() as seconds:  # load, check, time: the pipeline profile's runner stages
        with stage("load"):
            kernel = load_kernel(build)
            outputs = [aligned_copy(poisoned(a.shape, a.dtype)) for a in build.args if a.is_output]
            arrays = [aligned_copy(x) for x in inputs]
        if build.prepack is not None:  # packed once, untimed, as the compiled model packs its weights
            with stage("prepack"):
                arrays = _prepacked(build.prepack, arrays, policy.num_threads)
        with stage("load"):
            launch = kernel.bind(arrays, outputs, policy.num_threads)
        with stage("check"):
            start = time.perf_counter()
            launch.run()
            check_s = time.perf_counter() - start
            has_dims = any(a.name == DIMS_INPUT and not a.is_output for a in build.args)
            storage = [a.shape for a in build.args if a.is_output] if has_dims else None
            outputs = outputs_within_extents(launch.outputs(), references, storage)
            ok, max_error, message = compare_outputs(outputs, references, policy.rtol, policy.atol_scale)
        if not ok:
            return RunResult("wrong_answer", message, max_error=max_error, stages=dict(seconds))
        with stage("time"):
            evict = constant_evictor(arrays, [a.is_constant for a in build.args if not a.is_output], policy)
            once = time_slow_candidate(launch.run, check_s, best_s, policy, evict)
            samples = once if once is not None else time_runs(launch.run, policy, best_s, evict)
    note = "" if once is None else f"timed once: over {policy.time_once_over:g}x the best so far ({best_s * 1e3:.4g} ms)"
    return RunResult("ok", note, tuple(samples), max_error=max_error, stages=seconds)


def _prepacked(prepack: tuple[int, BuildResult], arrays: list[np.ndarray], num_threads: int | None) -> list[np.ndarray]:
    """`arrays` with the input at the packing kernel's position replaced by its packed copy."""
    position, packing = prepack
    (spec,) = [a for a in packing.args if a.is_output]
    packed = aligned_copy(np.zeros(spec.shape, spec.dtype))
    load_kernel(packing).bind([arrays[position]], [packed], num_threads).run()
    return [packed if j == position else a for j, a in enumerate(arrays)]


def _worker_main(conn: Any, num_threads: int | None) -> None:
    die_with_parent()
    if num_threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(num_threads)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the tuner went away: so do we
            return
        if msg[0] == "stop":
            return
        _, build, inputs, references, policy, best_s = msg
        try:
            result = _measure_in_worker(build, inputs, references, policy, best_s)
        except Exception as e:
            result = RunResult("run_error", f"{type(e).__name__}: {str(e).strip()[:500]}")
        conn.send(("result", result))


# ---------------------------------------------------------------------------- tuner side
class MeasureLock:
    """Exclusive flock on a file; waits up to timeout_s, then raises MeasureLockTimeout."""

    def __init__(self, path: str | Path | None = None, timeout_s: float = 600.0):
        self.path = Path(path) if path is not None else cache_dir() / "measure.lock"
        self.timeout_s = timeout_s
        self._fd: int | None = None

    def __enter__(self) -> MeasureLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise MeasureLockTimeout(
                        f"another tilegraph process is timing kernels (lock {self.path}); waited {self.timeout_s:g} s"
                    ) from None
                time.sleep(0.02)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class Runner:
    def __init__(self, policy: MeasurePolicy | None = None, reference: ReferenceFn | None = None,
                 lock_path: str | Path | None = None, lock_timeout_s: float = 600.0, target: Any = "cpu"):
        self.policy = (policy or MeasurePolicy()).resolved()
        self.reference = reference
        self.lock = MeasureLock(lock_path, lock_timeout_s)
        self.target = target
        self._proc: Any = None
        self._conn: Any = None
        self._fallback_kernels: dict[str, Any] = {}
        self.restarts = 0

    # ------------------------------------------------------------------ worker lifecycle
    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, self.policy.num_threads), daemon=True)
        with spawn_without_main():
            proc.start()
        child.close()
        if not parent.poll(_STARTUP_TIMEOUT_S):
            proc.kill()
            raise TilegraphError(f"the measurement worker did not start within {_STARTUP_TIMEOUT_S:g} s")
        parent.recv()
        self._proc, self._conn = proc, parent

    def _stop_worker(self, kill: bool) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            try:
                conn.send(("stop",))
            except OSError:
                proc.kill()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()

    def warm(self) -> None:
        """Start the measurement worker now (it starts on the first candidate otherwise)."""
        if self._proc is None or not self._proc.is_alive():
            self._start()

    def close(self) -> None:
        self._stop_worker(kill=False)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._stop_worker(kill=True)
        except Exception:
            pass

    # ------------------------------------------------------------------ references
    def references(self, workload: Workload, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The outputs a candidate must match; with run-time dims, only their run-time extents."""
        return valid_regions(workload, self._references(workload, inputs))

    def _references(self, workload: Workload, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.reference is not None:
            return [np.asarray(r, dtype=np.float64) for r in self.reference(workload, inputs)]
        refs = library_reference(workload, inputs)
        if refs is not None:
            return refs
        return self._default_schedule_outputs(workload, inputs)

    def _default_schedule_outputs(self, workload: Workload, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """No numpy reference for this workload: the default-schedule kernel's output stands in."""
        kernel = self._fallback_kernels.get(workload.key)
        if kernel is None:
            try:
                from tilegraph.driver import build
            except ImportError:
                raise TilegraphError(f"no reference is available to check {workload.op_name} "
                                     "(tilegraph.testing has none and tilegraph.driver is missing)") from None
            kernel = build(workload, target=self.target)
            self._fallback_kernels[workload.key] = kernel
        outs = kernel(*inputs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        return [np.asarray(o, dtype=np.float64) for o in outs]

    # ------------------------------------------------------------------ measuring
    def run(self, workload: Workload, build: BuildResult, seed: int, timeout_s: float | None = None,
            best_s: float | None = None) -> RunResult:
        """Check then time one candidate on fresh random inputs; never raises for a bad candidate.
        `timeout_s` lowers the policy's timeout for this candidate (a tuning budget about to end);
        `best_s`, the best latency so far, lets a far slower candidate be timed once
        (measure.time_slow_candidate)."""
        return run_seeded(self, workload, build, seed, timeout_s, best_s)

    def prepare(self, workload: Workload, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The inputs and float64 references `run(workload, build, seed)` would draw, drawn ahead
        (the search loop draws them while the builders compile); give them to run_on."""
        inputs = random_inputs(workload, seed)
        return inputs, self.references(workload, inputs)

    def run_on(self, build: BuildResult, inputs: Sequence[np.ndarray], references: Sequence[np.ndarray],
               timeout_s: float | None = None, best_s: float | None = None) -> RunResult:
        """Check one candidate against `references` on `inputs`, then time it (in the worker)."""
        if not build.ok:
            return RunResult(build.error_kind or "build_error", build.message)
        timeout = self.policy.timeout_s if timeout_s is None else min(self.policy.timeout_s, timeout_s)
        with stage("run"), self.lock:
            result = self._run_locked(build, list(inputs), list(references), timeout, best_s)
        for name, seconds in result.stages.items():  # the worker's stages, for the pipeline profile
            add_stage(f"run.{name}", seconds)
        return result

    def check_here(self, kernel: Any, inputs: Sequence[np.ndarray], references: Sequence[np.ndarray],
                   storage: Sequence[tuple[int, ...]] | None = None) -> RunResult:
        """Check a kernel in this process, never timing it: the final re-check of a tuned kernel
        (the one tg.tune returns) and kernels that run under an emulator (their own process).
        Outputs are poisoned first; a kernel error is a "crash" ("timeout" from an emulator).
        `storage`: the outputs' storage shapes where the workload has run-time dims."""
        outputs = [poisoned(tuple(b.shape), b.dtype.array_numpy) for b in kernel.outputs]
        try:
            kernel(*inputs, out=tuple(outputs))
        except TilegraphError as e:
            return RunResult("timeout" if isinstance(e, TimeoutError) else "crash", str(e))
        # a GPU kernel's parameters are flat (its outputs come back by element count): seen in the
        # reference's shape where the counts agree
        outputs = [o.reshape(r.shape) if o.shape != r.shape and o.size == r.size else o
                   for o, r in zip(outputs, references)]
        outputs = outputs_within_extents(outputs, references, storage)
        ok, max_error, message = compare_outputs(outputs, references, self.policy.rtol, self.policy.atol_scale)
        return RunResult("ok", max_error=max_error) if ok else RunResult("wrong_answer", message, max_error=max_error)

    def _run_locked(self, build: BuildResult, inputs: list[np.ndarray], refs: list[np.ndarray],
                    timeout_s: float, best_s: float | None = None) -> RunResult:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self._stop_worker(kill=True)
            self._start()
        conn, proc = self._conn, self._proc
        try:
            conn.send(("measure", build, inputs, refs, self.policy, best_s))
            if conn.poll(timeout_s):
                return conn.recv()[1]
        except (EOFError, OSError):
            return self._crashed(proc)
        self._stop_worker(kill=True)
        self.restarts += 1
        return RunResult("timeout", f"no result within {timeout_s:g} s; the worker was killed")

    def _crashed(self, proc: Any) -> RunResult:
        proc.join(5)
        code = proc.exitcode
        self._stop_worker(kill=True)
        self.restarts += 1
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return RunResult("crash", f"the kernel killed its worker process ({name})")
        return RunResult("crash", f"the worker process exited unexpectedly (exit code {code})")
