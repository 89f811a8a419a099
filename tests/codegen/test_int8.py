"""8-bit integers in compiled code (codegen/int8.py): vector loads widen them to int32 or float32
lanes, stores keep each int32 lane's low 8 bits, a conversion through 8 bits wraps; compiled
kernels agree with the interpreter bit for bit, and integer products (accumulate="int32") with
the float64 reference exactly, on odd sizes with padded borders reading the zero point."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.graph.construct import construct_one

pytestmark = pytest.mark.needs_cc


def _quantize_chains(n: int) -> tg.Workload:
    x = te.placeholder((n,), "float32", name="X")
    q = te.placeholder((n,), "int8", name="Q")
    u = te.compute((n,), lambda i: te.cast("uint8", te.cast("int32", te.cast(
        "int8", te.min_(te.max_(te.round_(x[i] * 3.0), -128.0), 127.0))) + 128), name="U")
    f = te.compute((n,), lambda i: te.cast("float32", te.cast("int8", te.round_(x[i] * 2.0)))
                   + te.cast("float32", q[i]) * 0.5, name="F")
    p = te.compute((n,), lambda i: te.select(i.gt(3), q[i], te.const(-5, "int8")), name="P")
    return tg.Workload([x, q], [u, f, p])


@pytest.mark.parametrize("n", [1, 13, 61])
def test_quantize_chains_vectorised_give_the_interpreters_bits(n, rng):
    wl = _quantize_chains(n)
    sch = tg.Schedule(wl)
    for stage in ("U", "F", "P"):
        sch.vectorize(sch.loops(stage)[-1])
    kernel = tg.build(sch, target="cpu")
    if n >= 16:  # 8 or 16 lanes, as the target's registers hold
        assert "_store_v" in kernel.source and "_load_v" in kernel.source
    # within int8 after the scaling (x * 2): a float outside a conversion's range has no meaning in C
    x = np.clip(rng.standard_normal(n) * 30, -60, 60).astype(np.float32)
    q = rng.integers(-128, 128, n).astype(np.int8)
    outs = [np.full(n, 77, np.uint8), np.full(n, np.nan, np.float32), np.full(n, 77, np.int8)]  # poisoned
    kernel(x, q, out=outs)
    for got, want in zip(outs, tg.interpret(wl, x, q)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("h, ci, co, k, stride", [(9, 5, 7, 3, 1), (11, 16, 33, 3, 2), (6, 20, 16, 1, 1)])
def test_integer_convolution_is_exact(h, ci, co, k, stride, rng):
    x = te.placeholder((1, h, h, ci), "uint8", name="X")
    w = te.placeholder((k, k, ci, co), "int8", name="W")
    zero = 131
    y = ops.conv2d_nhwc(x, w, stride=stride, padding=k // 2, accumulate="int32", pad_value=zero)
    wl = tg.Workload([x, w], [y])
    trace = construct_one(wl, tg.Target("cpu"))
    kernel = tg.build(tg.Schedule.replay(wl, trace) if trace else tg.Schedule(wl), target="cpu")
    xs = rng.integers(0, 256, x.shape).astype(np.uint8)
    ws = rng.integers(-128, 128, w.shape).astype(np.int8)
    out = np.full(y.shape, -12345, np.int32)
    kernel(xs, ws, out=out)
    p = k // 2
    padded = np.pad(xs.astype(np.int64), ((0, 0), (p, p), (p, p), (0, 0)), constant_values=zero)
    want = np.zeros(y.shape, np.int64)
    for r in range(k):
        for s in range(k):
            window = padded[:, r:r + stride * (y.shape[1] - 1) + 1:stride, s:s + stride * (y.shape[2] - 1) + 1:stride]
            want += np.einsum("nhwc,co->nhwo", window, ws[r, s].astype(np.int64))
    np.testing.assert_array_equal(out, want)
