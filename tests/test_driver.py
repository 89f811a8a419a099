import numpy as np
import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.driver import build, default_schedule


def _matmul(m, n, k, name="C"):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name=name)
    return te.Workload([a, b], [c]), c


def _run(kernel, *arrays):
    outs = [np.full(b.shape, np.nan, b.dtype.numpy) for b in kernel_outputs(kernel)]
    kernel(*arrays, out=outs[0] if len(outs) == 1 else outs)
    return outs[0] if len(outs) == 1 else outs


def kernel_outputs(kernel):
    return kernel.outputs


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape", [(13, 7, 5), (1, 1, 1), (17, 67, 3), (2, 130, 9)])
def test_matmul_default_schedule_matches_numpy(shape, rng):
    m, n, k = shape
    wl, _ = _matmul(m, n, k)
    kernel = build(wl)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    _close(_run(kernel, a, b), a.astype(np.float64) @ b)
    assert kernel.lowered is not None and "void tg_" in kernel.source


@pytest.mark.needs_cc
def test_matmul_hand_schedule_split_reorder_vectorize_unroll_parallel(rng):
    wl, c = _matmul(13, 7, 5)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops(c)
    io, ii = sch.split(i, 4)
    ko, ki = sch.split(k, 2)
    sch.reorder(io, ko, ki, ii, j)
    sch.unroll(ii)
    sch.unroll(ki)
    sch.vectorize(j)
    sch.parallel(io)
    kernel = tg.build(sch, target="cpu")
    a = rng.standard_normal((13, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    _close(_run(kernel, a, b), a.astype(np.float64) @ b)
    assert "#pragma omp parallel for num_threads(num_threads)" in kernel.source


@pytest.mark.needs_cc
def test_hand_schedule_wide_vectors_and_parallel_source(rng):
    wl, c = _matmul(8, 48, 4)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops(c)
    sch.reorder(i, k, j)
    sch.vectorize(j)
    sch.parallel(i)
    target = tg.Target("cpu")
    kernel = build(sch, target=target)
    assert f"v{min(16, target.lanes('float32'))}sf" in kernel.source
    assert kernel.source.count("#pragma omp parallel for") == 1
    a = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((4, 48)).astype(np.float32)
    _close(_run(kernel, a, b), a.astype(np.float64) @ b)


@pytest.mark.needs_cc
@pytest.mark.parametrize("n", [1, 7, 13, 64, 67, 1000])
def test_elementwise_exp_select(n, rng):
    x = te.placeholder((3, n), name="X")
    y = te.compute((3, n), lambda i, j: te.select(x[i, j].gt(0.0), te.exp(x[i, j]), x[i, j] * 0.5), name="Y")
    kernel = build(te.Workload([x], [y]))
    a = rng.standard_normal((3, n)).astype(np.float32)
    a64 = a.astype(np.float64)
    _close(_run(kernel, a), np.where(a64 > 0, np.exp(a64), a64 * 0.5))


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape", [(5, 11), (1, 1), (16, 67)])
def test_max_reduction(shape, rng):
    m, n = shape
    x = te.placeholder((m, n), name="X")
    r = te.reduce_axis(n, "r")
    y = te.compute((m,), lambda i: te.max(x[i, r], axis=r), name="Y")
    kernel = build(te.Workload([x], [y]))
    a = rng.standard_normal((m, n)).astype(np.float32)
    _close(_run(kernel, a), a.astype(np.float64).max(axis=1))


@pytest.mark.needs_cc
def test_intermediate_buffer_and_math_intrinsics(rng):
    x = te.placeholder((6, 9), name="X")
    t = te.compute((6, 9), lambda i, j: te.sigmoid(x[i, j]) + te.sqrt(te.abs_(x[i, j])), name="T")
    y = te.compute((6, 9), lambda i, j: te.tanh(t[i, j]) * te.erf(t[i, j]) - te.rsqrt(t[i, j] + 1.0), name="Y")
    kernel = build(te.Workload([x], [y]))
    a = rng.standard_normal((6, 9)).astype(np.float32)
    a64 = a.astype(np.float64)
    from scipy.special import erf

    tt = 1 / (1 + np.exp(-a64)) + np.sqrt(np.abs(a64))
    _close(_run(kernel, a), np.tanh(tt) * erf(tt) - 1 / np.sqrt(tt + 1), tol=1e-4)
    assert "float b_T[54] __attribute__((aligned(64)));" in kernel.source  # small intermediate: a stack array


def test_default_schedule_is_parallel_and_vectorized():
    wl, c = _matmul(32, 48, 16)
    sch = default_schedule(wl, "cpu")
    text = str(sch)
    assert "parallel" in text and "vectorized" in text


def test_build_rejects_bad_arguments():
    with pytest.raises(TypeError, match="Schedule or a Workload"):
        build("not a schedule")
    wl, _ = _matmul(2, 2, 2)
    with pytest.raises(TypeError, match="target"):
        build(wl, target=3)


@pytest.mark.needs_cc
def test_register_tiled_gemm_keeps_accumulators_in_vector_registers(rng):
    wl, c = _matmul(24, 64, 10)
    sch = tg.Schedule(wl)
    wb = sch.cache_write(c, "local")
    i, j, k = sch.loops(c)
    io, ii = sch.split(i, 6)
    jo, jm, jv = sch.split(j, [None, 2, 16])
    sch.reorder(io, jo, k, ii, jm, jv)
    sch.reverse_compute_at(wb, jo)
    sch.unroll(ii)
    sch.unroll(jm)
    sch.vectorize(jv)
    sch.parallel(io)
    *_, a0, a1 = sch.loops(wb)
    b0, b1 = sch.split(a1, [2, 16])
    sch.unroll(a0)
    sch.unroll(b0)
    sch.vectorize(b1)
    kernel = build(sch, target=tg.Target("cpu"))
    if tg.Target("cpu").lanes("float32") >= 16:
        assert "v16sf r_C_local_0, r_C_local_1," in kernel.source
    a = rng.standard_normal((24, 10)).astype(np.float32)
    b = rng.standard_normal((10, 64)).astype(np.float32)
    _close(_run(kernel, a, b), a.astype(np.float64) @ b)
    # the lowered IR, registers included, means the same in the interpreter (whatever the host's ISA)
    from tilegraph.loop.ir import Allocate
    from tilegraph.loop.visit import walk_stmts
    from tilegraph.lower.pipeline import lower

    lowered = lower(sch.func, tg.Target("cpu", isa="avx512"))
    assert any(s.buffer.dtype.lanes == 16 for s in walk_stmts(lowered.body) if isinstance(s, Allocate))
    _close(np.asarray(tg.interpret(lowered, a, b)).reshape(24, 64), a.astype(np.float64) @ b)
