"""build_workers: a compile's CPU kernels are lowered and compiled in worker processes; the kernels
are the ones an in-process build makes, and a pool whose workers died costs no build."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.graph import build_workers as bw
from tilegraph.runtime import backends
from tilegraph.stages import recording
from tilegraph.te.workload import Workload

pytestmark = pytest.mark.needs_cc


def _workload(n: int) -> Workload:
    a, b = te.placeholder((n, 24), "float32", "a"), te.placeholder((24, 17), "float32", "b")
    return Workload([a, b], [ops.matmul(a, b)])


def _check(kernel, n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, 24)).astype(np.float32), rng.standard_normal((24, 17)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_a_build_inside_lowers_in_a_worker_and_makes_the_same_kernel():
    target = tg.Target("cpu")
    with recording() as seconds:
        here = tg.build(_workload(5), target)
    assert "lower" in seconds  # in this process
    with bw.build_workers(target, workers=2), recording() as seconds:
        kernel = tg.build(_workload(5), target)
    assert "lower" not in seconds and "compile" not in seconds  # both ran in a worker
    assert kernel.source == here.source and kernel.lib_path == here.lib_path
    _check(kernel, 5)


def test_the_pool_grows_and_is_shared(monkeypatch):
    target = tg.Target("cpu")
    monkeypatch.setattr(bw.os, "cpu_count", lambda: 4)  # a pool may be as large as the cores
    bw.shutdown()
    with bw.build_workers(target, workers=2):
        small = bw._pool
    with bw.build_workers(target, workers=3):
        assert bw._pool is not small and bw._size >= 3
        large = bw._pool
        _check(tg.build(_workload(6), target), 6)
    with bw.build_workers(target, workers=2):
        assert bw._pool is large  # no smaller pool beside it


def test_never_more_workers_than_cores(monkeypatch):
    monkeypatch.setattr(bw.os, "cpu_count", lambda: 2)
    bw.shutdown()
    with bw.build_workers(tg.Target("cpu"), workers=8):
        assert bw._size == 2


def test_one_worker_builds_here():
    target = tg.Target("cpu")
    with bw.build_workers(target, workers=1):
        assert not backends._cpu_builds  # nothing installed: the build runs in this thread
        _check(tg.build(_workload(3), target), 3)


def test_a_pool_whose_workers_died_costs_no_build():
    target = tg.Target("cpu")
    bw.shutdown()
    with bw.build_workers(target, workers=2):
        tg.build(_workload(9), target)  # the pool runs
        pool = bw._pool
        for process in list(pool._processes.values()):
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:  # the first death broke the pool, whose manager ended the rest
                pass
            process.join(timeout=30)
        _check(tg.build(_workload(11), target), 11)  # built here instead
    assert bw._pool is not pool  # dropped: the next use starts a new pool
    with bw.build_workers(target, workers=2):
        _check(tg.build(_workload(13), target), 13)
