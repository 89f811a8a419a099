"""bfloat16 as a storage type in the printers: uint16_t bits in memory, float values, every bfloat16
operation rounded back (codegen/bfloat16.py); compiled kernels agree with the interpreter bit for
bit, vectorised or not, and GEMMs reading bfloat16 accumulate in float32."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.codegen.c import codegen_c
from tilegraph.codegen.cuda import codegen_cuda
from tilegraph.graph.construct import construct_one
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.lower.pipeline import lower

ml_dtypes = pytest.importorskip("ml_dtypes")
AVX512 = tg.Target.from_string("cpu -isa=avx512")
# specials first: ties (1 + 2**-8 rounds down, 1 + 3 * 2**-8 up), the largest bfloat16, a subnormal,
# infinities, NaN and signed zeros; then ordinary values
SPECIAL = [1.00390625, 1.01171875, 3.3895314e38, 9.2e-41, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-3, -7.25]


def _values(n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.concatenate([np.array(SPECIAL, np.float32), rng.standard_normal(n).astype(np.float32) * 4])[:n]
    return rng.permutation(x).astype(ml_dtypes.bfloat16)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype == np.dtype(ml_dtypes.bfloat16)
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    mismatch = (got.view(np.uint16) != want.view(np.uint16)) & ~nan
    assert not mismatch.any(), (got[mismatch], want[mismatch])


def _elementwise(n: int) -> tuple[tg.Workload, te.Tensor]:
    x = te.placeholder((n,), "bfloat16", name="X")
    f = te.placeholder((n,), "float32", name="F")
    y = te.compute((n,), lambda i: te.max_(x[i] * te.const(1.5, "bfloat16") + te.cast("bfloat16", f[i]),
                                           te.exp(x[i])), name="Y")
    z = te.compute((n,), lambda i: te.cast("float32", y[i]) * 0.5 + f[i], name="Z")
    return tg.Workload([x, f], [y, z]), y


def test_buffers_are_uint16_bits_and_helpers_appear_only_when_used():
    wl, _ = _elementwise(8)
    code = codegen_c(lower(tg.Schedule(wl).func, AVX512)).code
    assert "uint16_t* restrict b_X" in code and "float* restrict b_F" in code
    assert "tgh_bf16_bits(" in code and "tgh_round_bf16(" in code
    a = te.placeholder((8,), name="A")
    plain = tg.Workload([a], [te.compute((8,), lambda i: a[i] * 2.0, name="B")])
    assert "bf16" not in codegen_c(lower(tg.Schedule(plain).func, AVX512)).code


@pytest.mark.needs_cc
@pytest.mark.parametrize("n, vectorize", [(37, True), (37, False), (5, True)])
def test_elementwise_bfloat16_compiles_to_the_interpreted_bits(n, vectorize, rng):
    wl, y = _elementwise(n)
    sch = tg.Schedule(wl)
    if vectorize:
        for tensor in wl.outputs:
            (i,) = sch.loops(tensor)
            sch.vectorize(i)
    kernel = tg.build(sch, target="cpu")
    if vectorize and n >= 16:
        assert "tgh_bf16_load_v" in kernel.source and "tgh_bf16_store_v" in kernel.source
    x, f = _values(n, rng), rng.standard_normal(n).astype(np.float32)
    want_y, want_z = tg.interpret(wl, x, f)
    got_y, got_z = kernel(x, f)
    _same_bits(got_y, want_y)
    np.testing.assert_allclose(got_z, want_z, rtol=1e-6)
    # the interpreter's meaning, from first principles: float32 arithmetic rounded at each step
    r = lambda v: np.asarray(v, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        expected = np.maximum(r(r(xf * np.float32(1.5)) + r(f)), r(np.exp(xf)))  # NaN-propagating max
    _same_bits(want_y, expected.astype(ml_dtypes.bfloat16))


@pytest.mark.needs_cc
def test_strided_bfloat16_reads_gather(rng):
    x = te.placeholder((7, 19), "bfloat16", name="X")
    t = te.compute((19, 7), lambda i, j: x[j, i] + te.const(0.25, "bfloat16"), name="T")
    wl = tg.Workload([x], [t])
    sch = tg.Schedule(wl)
    _, j = sch.loops(t)
    sch.vectorize(j)
    kernel = tg.build(sch, target="cpu")
    a = _values(7 * 19, rng).reshape(7, 19)
    _same_bits(kernel(a), tg.interpret(wl, a))


def _bf16_matmul(m: int, n: int, k: int) -> tg.Workload:
    a = te.placeholder((m, k), "bfloat16", name="A")
    b = te.placeholder((k, n), "bfloat16", name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate="float32")])


@pytest.mark.needs_cc
@pytest.mark.parametrize("m, n, k", [(1, 3, 5), (7, 33, 19), (24, 80, 64)])
def test_constructed_bfloat16_gemm_accumulates_in_float32(m, n, k, rng):
    """Gensor's constructed schedule of a GEMM reading bfloat16: against float64 on the same
    (exactly representable) inputs, with the outputs poisoned first."""
    wl = _bf16_matmul(m, n, k)
    trace = construct_one(wl, tg.Target("cpu"))
    sch = tg.Schedule.replay(wl, trace) if trace else tg.Schedule(wl)
    kernel = tg.build(sch, target="cpu")
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    out = np.full((m, n), np.nan, np.float32)
    kernel(a, b, out=out)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_gpu_printers_keep_bfloat16_scalar_with_device_helpers():
    wl, _ = _elementwise(37)
    cuda = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0")
    code = codegen_cuda(lower_gpu(tg.Schedule(wl).func, cuda)).code
    assert "static __device__ __forceinline__ uint16_t tgh_bf16_bits(float x)" in code
    assert "uint16_t* __restrict__ b_X" in code or "uint16_t* b_X" in code
    assert "sizeof(uint16_t)" in code and "sizeof(float)" in code
