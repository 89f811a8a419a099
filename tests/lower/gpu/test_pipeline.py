import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Barrier, For
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.lower.passes.common import NOP
from tilegraph.te.expr import Ramp

OPENCL = tg.Target("opencl")


def gemm_schedule(m=32, k=16, n=24, tile=8, threads=4, kstep=4, shared=True):
    wl = workloads.from_spec(f"matmul:{m},{k},{n}")
    sch = tg.Schedule(wl)
    i, j, r = sch.loops("matmul")
    bi, ti, ii = sch.split(i, [None, threads, tile // threads])
    bj, tj, ij = sch.split(j, [None, threads, tile // threads])
    ko, ki = sch.split(r, [None, kstep])
    sch.reorder(bi, bj, ti, tj, ko, ki, ii, ij)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    wb = sch.cache_write("matmul", "local")
    sch.reverse_compute_at(wb, tj)
    if shared:
        for buf in ("a", "b"):
            copy = sch.cache_read("matmul", buf, "shared")
            sch.compute_at(copy, ko)
    return wl, sch


def _inputs(wl, rng):
    return [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]


def _reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.fixture(scope="module")
def gemm():
    wl, sch = gemm_schedule()
    return wl, sch, lower_gpu(sch.func, OPENCL)


@pytest.mark.parametrize("order", ["lockstep", "serial", "reversed", "random"])
def test_lowered_gemm_matches_numpy_in_every_thread_order(gemm, rng, order):
    wl, _, program = gemm
    a, b = _inputs(wl, rng)
    out = tg.interpret(program.lowered, a, b, thread_order=order).reshape(32, 24)
    np.testing.assert_allclose(out, _reference(a, b), rtol=1e-4, atol=1e-4)


def test_grid_and_block_come_from_bound_loop_extents(gemm):
    _, _, program = gemm
    (kernel,) = program.kernels
    assert kernel.grid == (3, 4, 1)
    assert kernel.block == (4, 4, 1)
    assert kernel.shared_bytes == 2 * (8 * 4 + 4 * 8) * 4  # an a tile and a b tile, twice (double_buffer)


def test_barriers_guard_the_shared_tiles(gemm):
    _, _, program = gemm
    barriers = [s for s in walk_stmts(program.lowered.body) if isinstance(s, Barrier)]
    assert len(barriers) == 2  # before the copy (last iteration's readers) and before the compute


def test_cooperative_fetch_spreads_the_copy_over_all_threads(gemm):
    _, _, program = gemm
    copies = [s for s in walk_stmts(program.lowered.body)
              if getattr(s, "buffer", None) is not None and getattr(s.buffer, "scope", "") == "shared"
              and not hasattr(s, "body")]
    # 32 elements per tile over 16 threads, four (one float4) per thread: one vector store per tile,
    # once before the loop (tile 0) and once in it (the next tile, double_buffer)
    assert len(copies) == 4 and all(isinstance(c.indices[0], Ramp) for c in copies)


def test_removing_a_barrier_is_detected(gemm, rng):
    wl, sch, _ = gemm
    a, b = _inputs(wl, rng)
    broken = lower_gpu(sch.func, OPENCL, barriers=False)
    assert not any(isinstance(s, Barrier) for s in walk_stmts(broken.lowered.body))
    for order in ("serial", "reversed"):
        out = tg.interpret(broken.lowered, a, b, thread_order=order).reshape(32, 24)
        assert not np.allclose(out, _reference(a, b), rtol=1e-4, atol=1e-4, equal_nan=False)


def test_dropping_only_the_write_after_read_barrier_is_detected(gemm, rng):
    wl, _, program = gemm
    a, b = _inputs(wl, rng)
    first = next(s for s in walk_stmts(program.lowered.body) if isinstance(s, Barrier))
    body = rewrite_stmt(program.lowered.body, lambda s: NOP if s is first else None)
    from dataclasses import replace

    func = replace(program.lowered, body=body)
    out = tg.interpret(func, a, b, thread_order="reversed").reshape(32, 24)
    assert not np.allclose(out, _reference(a, b), rtol=1e-4, atol=1e-4)


def test_too_many_threads_is_refused():
    _, sch = gemm_schedule(m=64, n=64, tile=64, threads=32, shared=False)
    with pytest.raises(tg.LoweringError, match="threads per block"):
        lower_gpu(sch.func, tg.Target("opencl", max_threads_per_block=256))


def test_too_much_shared_memory_is_refused():
    _, sch = gemm_schedule()
    with pytest.raises(tg.LoweringError, match="shared memory"):
        lower_gpu(sch.func, tg.Target("opencl", shared_memory_bytes=128))


def test_parallel_loop_is_refused_on_gpu():
    wl = workloads.from_spec("matmul:8,4,8")
    sch = tg.Schedule(wl)
    i, _, _ = sch.loops("matmul")
    sch.parallel(i)
    with pytest.raises(tg.LoweringError, match="parallel"):
        lower_gpu(sch.func, OPENCL)


def test_cpu_target_is_refused():
    wl = workloads.from_spec("matmul:8,4,8")
    with pytest.raises(ValueError, match="GPU target"):
        lower_gpu(tg.Schedule(wl).func, tg.Target("cpu"))


def test_unbound_nest_becomes_a_one_thread_kernel(rng):
    wl = workloads.from_spec("matmul:4,3,5")
    program = lower_gpu(tg.Schedule(wl).func, OPENCL)
    (kernel,) = program.kernels
    assert kernel.grid == (1, 1, 1) and kernel.block == (1, 1, 1)
    a, b = _inputs(wl, rng)
    np.testing.assert_allclose(tg.interpret(program.lowered, a, b).reshape(4, 5), _reference(a, b), rtol=1e-5)


def test_storage_pad_changes_the_shared_row_pitch(rng):
    wl, sch = gemm_schedule()
    sch.storage_pad("b_shared", [0, 1])
    program = lower_gpu(sch.func, OPENCL)
    assert program.kernels[0].shared_bytes == 2 * (8 * 4 + 4 * 9) * 4
    a, b = _inputs(wl, rng)
    out = tg.interpret(program.lowered, a, b, thread_order="reversed").reshape(32, 24)
    np.testing.assert_allclose(out, _reference(a, b), rtol=1e-4, atol=1e-4)


def test_vthread_becomes_unrolled_register_tile(rng):
    wl = workloads.from_spec("matmul:8,4,16")
    sch = tg.Schedule(wl)
    i, j, _ = sch.loops("matmul")
    sch.bind(i, "blockIdx.x")
    jv, jt = sch.split(j, [2, 8])
    sch.reorder(jt, jv)
    sch.bind(jt, "threadIdx.x")
    sch.bind(jv, "vthread")
    program = lower_gpu(sch.func, OPENCL)
    assert not any(isinstance(s, For) and s.kind == "vthread" for s in walk_stmts(program.lowered.body))
    a, b = _inputs(wl, rng)
    np.testing.assert_allclose(tg.interpret(program.lowered, a, b, thread_order="serial").reshape(8, 16),
                               _reference(a, b), rtol=1e-4, atol=1e-4)
