"""double_buffer: two copies of each shared tile, the next tile's loads in flight during the compute,
one barrier per reduction step; the interpreter (every thread order) and PoCL agree with numpy."""

from dataclasses import replace

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Allocate, Barrier, For, Seq
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu import double_buffer, insert_barriers
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.testing.reference import reference_outputs
from tilegraph.tune.gensor.gpu_state import GpuState, gpu_schedule

OPENCL = tg.Target("opencl", device_name="tests", num_sms=4, shared_memory_bytes=32 << 10, max_threads_per_block=256)
CASES = [
    ("matmul:64,64,64", GpuState(block=(32, 32), thread=(4, 4), vthread=(2, 2), rstep=(8,), pad=0, shared=True)),
    ("matmul:64,64,64", GpuState(block=(32, 32), thread=(4, 4), vthread=(1, 1), rstep=(8,), pad=1, shared=True)),
    ("matmul:33,20,12", GpuState(block=(11, 4), thread=(1, 1), vthread=(1, 1), rstep=(4,), pad=0, shared=True)),
]


def _k_loop(func):
    return next(s for s in walk_stmts(func.body) if isinstance(s, For) and s.var.name == "k_0")


def _inputs(wl, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    return arrays, reference_outputs(wl, arrays)[0]


@pytest.mark.extended
@pytest.mark.parametrize("spec,state", CASES)
def test_one_barrier_per_step_two_tiles_and_the_same_result(spec, state):
    wl = workloads.from_spec(spec)
    func = lower_gpu(gpu_schedule(wl, state).func, OPENCL).lowered
    loop = _k_loop(func)
    assert sum(isinstance(s, Barrier) for s in walk_stmts(loop.body)) == 1
    shared = {s.buffer.name: s.buffer.size for s in walk_stmts(func.body)
              if isinstance(s, Allocate) and s.buffer.scope == "shared"}
    stage = [s.buffer for s in walk_stmts(loop.body) if isinstance(s, Allocate) and s.buffer.scope == "local"]
    assert stage, "the next tile is loaded into registers first"
    inputs, ref = _inputs(wl)
    for order in ("lockstep", "serial", "reversed", "random"):
        got = np.asarray(tg.interpret(func, *inputs, thread_order=order, seed=6)).reshape(ref.shape)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=order)
    single = lower_gpu(gpu_schedule(wl, state).func, OPENCL, barriers=False).lowered  # no double_buffer there
    once = {s.buffer.name: s.buffer.size for s in walk_stmts(single.body)
            if isinstance(s, Allocate) and s.buffer.scope == "shared"}
    assert shared == {name: 2 * size for name, size in once.items()}, "two copies of each tile"


@pytest.mark.extended
def test_the_last_barrier_is_needed():
    wl, state = workloads.from_spec(CASES[0][0]), CASES[0][1]
    func = lower_gpu(gpu_schedule(wl, state).func, OPENCL).lowered
    loop = _k_loop(func)
    alloc = loop.body
    assert isinstance(alloc, Allocate) and isinstance(alloc.body, Seq) and isinstance(alloc.body.stmts[-1], Barrier)
    broken = replace(loop, body=replace(alloc, body=Seq(alloc.body.stmts[:-1])))
    bad = replace(func, body=rewrite_stmt(func.body, lambda s: broken if s is loop else None))
    inputs, ref = _inputs(wl)
    got = np.asarray(tg.interpret(bad, *inputs, thread_order="reversed")).reshape(ref.shape)
    assert not np.allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_tiles_that_would_not_fit_twice_stay_single():
    wl, state = workloads.from_spec(CASES[0][0]), CASES[0][1]
    func = lower_gpu(gpu_schedule(wl, state).func, OPENCL, barriers=False).lowered
    shared = sum(s.buffer.size * 4 for s in walk_stmts(func.body) if isinstance(s, Allocate) and s.buffer.scope == "shared")
    tight = tg.Target("opencl", device_name="tests", num_sms=4, shared_memory_bytes=shared + 4, max_threads_per_block=256)
    with_barriers = insert_barriers.run(func, tight)
    assert double_buffer.run(with_barriers, tight) == with_barriers
    assert double_buffer.run(with_barriers, OPENCL) != with_barriers


@pytest.mark.needs_opencl
@pytest.mark.parametrize("spec,state", CASES)
def test_double_buffered_gemm_runs_on_opencl(spec, state, opencl_device):
    wl = workloads.from_spec(spec)
    inputs, ref = _inputs(wl, seed=3)
    kernel = tg.build(gpu_schedule(wl, state), target="opencl")
    np.testing.assert_allclose(kernel(*inputs), ref, rtol=1e-4, atol=1e-4)
