"""build_workers: a compile's CPU kernels lowered, printed and compiled in worker processes.

    with build_workers(target):          # inside: every CPU kernel build of this process
        built = build_kernels(specs, ...)  # lowers in one of target.num_cores spawned workers

build_kernels runs its builds on threads, but lowering is Python: one thread lowers at a time
while the C compiler runs beside it, so a model's first compile spent half its time with one
core lowering (ResNet-50: 24 of 48 CPU-seconds of the compiling process in the lowering passes).
In workers every core lowers. What crosses is data: the schedule's loop nest goes out; the
library's path, its entry, its source and the lowered loop nest come back, and the library is
loaded here (runtime/backends.cpu_builds_by). Fusion and everything else stays in this process.

The pool starts on the first use and serves every compile of the process after it (spawning costs
about a second a worker: more than lowering a small model's kernels); its workers die with this
process. A worker that dies takes only its build with it: that build runs here, and the next use
starts a new pool. Errors (a lowering error, a compiler error) cross as themselves.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from tilegraph.loop.ir import Func
from tilegraph.runtime.backends import backend_for, cpu_builds_by, lower_and_compile_cpu
from tilegraph.target import Target

_lock = threading.Lock()
_pool: cf.ProcessPoolExecutor | None = None  # one pool for the process, as large as any call asked
_size = 0
_at_exit = False


@contextmanager
def build_workers(target: Target, workers: int | None = None) -> Iterator[None]:
    """Inside, CPU builds of this process run in worker processes, at least `workers` of them
    (default: the target's cores); with one worker (or one core) they stay here, as before."""
    count = min(max(1, workers or target.num_cores or 1), os.cpu_count() or 1)  # never more than the cores
    if count < 2 or backend_for(target).is_gpu:  # GPU kernels are built by their drivers
        yield
        return
    _start(count)

    def build(func: Func, tgt: Target) -> tuple[str, str, str, Func]:
        with _lock:
            pool = _pool
        try:
            if pool is None:
                raise BrokenProcessPool("no pool")
            return pool.submit(lower_and_compile_cpu, func, tgt).result()
        except BrokenProcessPool:  # a worker died (killed, out of memory): this build runs here
            if pool is not None:
                _drop(pool)
            return lower_and_compile_cpu(func, tgt)

    with cpu_builds_by(build):
        yield


def _start(count: int) -> None:
    """Make the pool unless one of at least `count` workers runs, its workers spawned now, from
    this thread: a worker dies with the thread that spawned it (die_with_parent's
    PR_SET_PDEATHSIG), and build_kernels' threads end with each call. A larger count replaces
    the pool (the sizes a process asks for only grow: at most its cores)."""
    global _pool, _size, _at_exit
    from tilegraph.tune.measure import die_with_parent, spawn_without_main

    with _lock:
        if _pool is not None and _size >= count:
            return
        old = _pool
        if not _at_exit:
            atexit.register(shutdown)
            _at_exit = True
        _pool = cf.ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=die_with_parent)
        _size = count
        with spawn_without_main():  # the user's script is not re-run in the workers
            for _ in range(count):  # each submit that finds no idle worker spawns one
                _pool.submit(int)
    if old is not None:
        old.shutdown(wait=False)  # its builds in flight finish; new ones go to the new pool


def _drop(pool: cf.ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


def shutdown() -> None:
    """Stop the workers (at exit; tests that count processes may call it)."""
    global _pool, _size
    with _lock:
        pool, _pool, _size = _pool, None, 0
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["build_workers", "shutdown"]
