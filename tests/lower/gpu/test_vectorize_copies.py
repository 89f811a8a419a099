"""vectorize_copies (and cooperative_fetch's four elements per thread): float4 copies exactly where
both addresses are 16-byte aligned; results unchanged in every thread order, on PoCL and for nvcc."""

import shutil

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import workloads
from tilegraph.codegen.cuda import codegen_cuda
from tilegraph.codegen.opencl import codegen_opencl
from tilegraph.loop.ir import Buffer, BufferStore, For, Func, Seq
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu import vectorize_copies
from tilegraph.lower.gpu.memory_access import analyze
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.te.expr import BufferLoad, Const, Ramp, Var
from tilegraph.testing.reference import reference_outputs
from tilegraph.tune.gensor.gpu_state import GpuState, gpu_schedule

CUDA = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0", cc=shutil.which("nvcc") or "nvcc")
OPENCL = tg.Target("opencl", device_name="tests", num_sms=4, shared_memory_bytes=32 << 10, max_threads_per_block=256)
F32 = dt.float32


def _gemm(pad, spec="matmul:64,64,64"):
    wl = workloads.from_spec(spec)
    state = GpuState(block=(32, 32), thread=(4, 4), vthread=(2, 2), rstep=(8,), pad=pad, shared=True)
    return wl, gpu_schedule(wl, state)


def _vector_copies(func):
    return [s for s in walk_stmts(func.body) if isinstance(s, BufferStore) and isinstance(s.indices[0], Ramp)]


@pytest.mark.extended
@pytest.mark.parametrize("pad,vectorised", [(0, True), (4, True), (1, False)])
def test_gemm_tiles_copy_as_float4_when_rows_stay_aligned(pad, vectorised):
    wl, sch = _gemm(pad)
    lowered = lower_gpu(sch.func, OPENCL).lowered
    assert bool(_vector_copies(lowered)) is vectorised
    rng = np.random.default_rng(pad)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    ref = reference_outputs(wl, inputs)[0]
    for order in ("lockstep", "serial", "reversed", "random"):
        got = np.asarray(tg.interpret(lowered, *inputs, thread_order=order, seed=4)).reshape(ref.shape)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=order)


def test_vector_copies_print_per_dialect_and_stay_coalesced():
    _, sch = _gemm(0)
    cuda = codegen_cuda(lower_gpu(sch.func, CUDA)).code
    assert "*(float4*)(&b_" in cuda and "__shared__ __align__(16) float" in cuda
    assert "vstore4(vload4(0, &b_" in codegen_opencl(lower_gpu(sch.func, OPENCL)).code
    fetch = [r for r in analyze(lower_gpu(sch.func, CUDA).kernels[0]) if r.scope == "global" and r.kind == "load"]
    assert fetch and all(r.coalesced for r in fetch)


def _copies(dst_index, src_index, same_buffer=False):
    src = Buffer("src", (64,), F32)
    dst = src if same_buffer else Buffer("dst", (64,), F32)
    tx = Var("tx")
    body = Seq(tuple(BufferStore(dst, (dst_index(tx) + Const(k),), BufferLoad(src, (src_index(tx) + Const(k),)))
                     for k in range(4)))
    return Func("f", (src, dst) if not same_buffer else (src,), For(tx, 8, "threadIdx.x", body))


@pytest.mark.parametrize("dst,src,same,expected", [
    (lambda t: t * Const(4), lambda t: t * Const(8), False, True),
    (lambda t: t * Const(4) + Const(1), lambda t: t * Const(8), False, False),   # misaligned destination
    (lambda t: t * Const(4), lambda t: t * Const(6), False, False),              # source not a multiple of 4
    (lambda t: t * Const(4), lambda t: t * Const(4) + Const(32), True, False),   # one buffer: keep the order
])
def test_only_aligned_copies_between_buffers_are_vectorised(dst, src, same, expected):
    func = _copies(dst, src, same)
    assert bool(_vector_copies(vectorize_copies.run(func))) is expected


@pytest.mark.needs_nvcc
def test_vector_copies_compile_with_nvcc():
    from tilegraph.build.compile import check_cuda_syntax

    _, sch = _gemm(0)
    check_cuda_syntax(codegen_cuda(lower_gpu(sch.func, CUDA)).code, CUDA)


@pytest.mark.needs_opencl
def test_vector_copies_run_on_opencl(opencl_device):
    wl, sch = _gemm(0, "matmul:64,32,64")
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs)
    kernel = tg.build(sch, target="opencl")
    assert "vload4" in kernel.source
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
