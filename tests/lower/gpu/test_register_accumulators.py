"""register_accumulators: a thread's in-place output tile (a strided vthread tile, or a serial
per-thread reduction) lives in registers; never a racy or out-of-bounds copy."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import workloads
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, For, Func, IfThenElse, Seq
from tilegraph.loop.visit import stmt_children, walk_stmts
from tilegraph.lower.gpu import register_accumulators
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.schedule.defaults import flat_gpu_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.expr import BufferLoad, Const, Var
from tilegraph.testing.reference import reference_outputs
from tilegraph.tune.gensor.gpu_state import GpuState, gpu_schedule

OPENCL = tg.Target("opencl", device_name="tests", num_sms=4, shared_memory_bytes=32 << 10, max_threads_per_block=256)


def _global_stores_in_serial_loops(func, name):
    """Stores to global `name` that sit inside a serial loop (inside the kernel's thread loop)."""
    found = 0

    def visit(s, in_serial):
        nonlocal found
        if isinstance(s, BufferStore) and s.buffer.name == name and in_serial:
            found += 1
        if isinstance(s, For):
            in_serial = in_serial or s.kind == "serial"
        for k in _children(s):
            visit(k, in_serial)

    visit(func.body, False)
    return found


def _children(s):
    return stmt_children(s)


def _local_buffers(func):
    return {x.buffer.name: x.buffer for x in walk_stmts(func.body) if isinstance(x, Allocate) and x.buffer.scope == "local"}


VTHREAD_CASES = [
    # (spec, state): 2x4 and 4x4 register tiles in strided vthread chunks, odd K
    ("matmul:16,24,8", GpuState(block=(8, 8), thread=(2, 4), vthread=(1, 2), rstep=(4,), pad=1, shared=True)),
    ("matmul:32,12,32", GpuState(block=(16, 16), thread=(4, 4), vthread=(2, 2), rstep=(3,), pad=0, shared=True)),
]


@pytest.mark.parametrize("spec,state", VTHREAD_CASES)
def test_vthread_tiles_accumulate_in_registers_and_stay_correct(spec, state):
    wl = workloads.from_spec(spec)
    program = lower_gpu(gpu_schedule(wl, state).func, OPENCL)
    func = program.lowered
    out_name = wl.outputs[0].name
    assert _global_stores_in_serial_loops(func, out_name) == 0, "the reduction must not touch global memory"
    regs = [b for b in _local_buffers(func).values() if b.name.startswith(f"{out_name}_reg")]
    assert len(regs) == 1 and regs[0].shape == (state.thread[0] * state.thread[1],)
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    ref = reference_outputs(wl, inputs)[0]
    for order in ("serial", "reversed", "random"):
        got = np.asarray(tg.interpret(func, *inputs, thread_order=order, seed=3)).reshape(ref.shape)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.needs_opencl
@pytest.mark.parametrize("spec,state", VTHREAD_CASES)
def test_vthread_register_tiles_run_on_opencl(spec, state, opencl_device):
    wl = workloads.from_spec(spec)
    kernel = tg.build(gpu_schedule(wl, state), target="opencl")
    rng = np.random.default_rng(8)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    np.testing.assert_allclose(kernel(*inputs), reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)
    assert "_reg[" in kernel.source


def _thread_loop_func(index, n_threads=4, extent=8, guard=None, init=False):
    """for bx in 2 blockIdx.x: for tx in n threadIdx.x: for k in 3: [if k == 0: C[index] = 0]
    C[index] = C[index] + A[k]."""
    a = Buffer("a", (3,), dt.float32)
    c = Buffer("c", (extent,), a.dtype)
    bx, tx, k = Var("bx"), Var("tx"), Var("k")
    idx = index(bx, tx)
    body = BufferStore(c, (idx,), BufferLoad(c, (idx,)) + BufferLoad(a, (k,)))
    if init:
        body = Seq((IfThenElse(k.eq(0), BufferStore(c, (idx,), Const(0.0, dt.float32))), body))
    if guard is not None:
        body = IfThenElse(guard(bx, tx), body)
    nest = For(bx, 2, "blockIdx.x", For(tx, n_threads, "threadIdx.x", For(k, 3, "serial", body)))
    return Func("f", (a, c), nest)


def test_threads_sharing_an_element_are_left_alone():
    func = _thread_loop_func(lambda bx, tx: bx * Const(2) + tx // Const(2))
    assert register_accumulators.run(func) == func


def test_a_guard_on_the_position_inside_the_body_is_left_alone():
    func = _thread_loop_func(lambda bx, tx: bx * Const(4) + tx, guard=lambda bx, tx: (bx * Const(4) + tx).lt(7))
    assert register_accumulators.run(func) == func


def test_disjoint_private_accumulators_are_promoted():
    func = _thread_loop_func(lambda bx, tx: bx * Const(4) + tx, init=True)
    out = register_accumulators.run(func)
    regs = _local_buffers(out)
    assert list(regs) == ["c_reg"] and regs["c_reg"].shape == (1,)
    a = np.array([1.5, -2.0, 4.0], dtype=np.float32)
    for order in ("serial", "reversed"):
        np.testing.assert_array_equal(np.asarray(tg.interpret(out, a, thread_order=order)), np.full(8, 3.5, np.float32))


def test_a_register_read_before_written_starts_from_memory():
    # no init: the first iteration reads the element, so the register is loaded first
    func = _thread_loop_func(lambda bx, tx: bx * Const(4) + tx)
    seq = register_accumulators.run(func).body.body.body.body
    assert isinstance(seq, Seq) and isinstance(seq.stmts[0], BufferStore) and seq.stmts[0].buffer.name == "c_reg"
    # with `if k == 0: C = 0` first, nothing needs loading
    seq = register_accumulators.run(_thread_loop_func(lambda bx, tx: bx * Const(4) + tx, init=True)).body.body.body.body
    assert isinstance(seq.stmts[0], For) and len(seq.stmts) == 2


def test_out_of_bounds_bases_are_left_alone():
    func = _thread_loop_func(lambda bx, tx: bx * Const(4) + tx, extent=7)
    assert register_accumulators.run(func) == func


def test_serial_reductions_of_a_flat_schedule_use_a_register():
    wl = workloads.from_spec("sum:37,5")
    sch = Schedule(wl)
    flat_gpu_schedule(sch, wl.outputs[0].name)  # one row per thread (the default is a warp per row)
    program = lower_gpu(sch.func, OPENCL)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    ref = reference_outputs(wl, inputs)[0]
    got = np.asarray(tg.interpret(program.lowered, *inputs, thread_order="reversed")).reshape(ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert any(name.endswith("_reg") for name in _local_buffers(program.lowered))


def test_the_promoted_body_is_loads_then_body_then_stores():
    func = _thread_loop_func(lambda bx, tx: bx * Const(4) + tx)
    alloc = register_accumulators.run(func).body.body.body
    assert isinstance(alloc, Allocate) and isinstance(alloc.body, Seq)
    load, loop, store = alloc.body.stmts
    assert load.buffer.name == "c_reg" and isinstance(loop, For) and store.buffer.name == "c"
