"""The GPU GEMM of test_pipeline.py after each GPU pass, for the per-pass tests."""

from __future__ import annotations

import numpy as np

import tilegraph as tg
from tests.lower.gpu.test_pipeline import gemm_schedule
from tilegraph.lower.gpu.pipeline import GPU_PASSES

OPENCL = tg.Target("opencl", device_name="tests", num_sms=4, shared_memory_bytes=32 << 10, max_threads_per_block=256)


def stages(**schedule_args):
    """(workload, {"input": func, <pass name>: func after it, ...}) through GPU_PASSES."""
    wl, sch = gemm_schedule(**schedule_args)
    func = sch.func
    out = {"input": func}
    for name, run in GPU_PASSES:
        func = run(func, OPENCL)
        out[name] = func
    return wl, out


def means_matmul(wl, func, order="lockstep"):
    """Before insert_barriers only the lockstep order (every statement by all threads, in turn) is
    meaningful; after it, any order must give the product."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs)
    got = np.asarray(tg.interpret(func, a, b, thread_order=order, seed=1)).reshape(a.shape[0], b.shape[1])
    return np.allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
