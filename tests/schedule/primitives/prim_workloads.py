"""Small workloads and numpy float64 references shared by the schedule-primitive tests."""

from __future__ import annotations

import numpy as np

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.interpret import interpret


def matmul(m: int, n: int, k: int) -> tg.Workload:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tg.Workload([a, b], [c])


def matmul_relu(m: int, n: int, k: int) -> tg.Workload:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    d = te.compute((m, n), lambda i, j: te.max_(c[i, j], 0.0), name="D")
    return tg.Workload([a, b], [d])


def conv_with_pad(c: int = 2, h: int = 7, w: int = 5, f: int = 3) -> tg.Workload:
    """pad (zero border of 1) -> 3x3 convolution, 'same' size."""
    x = te.placeholder((c, h, w), name="X")
    wt = te.placeholder((f, c, 3, 3), name="W")
    pad = te.compute((c, h + 2, w + 2), lambda cc, ph, pw: te.select(
        te.all_of(ph.ge(1), ph.lt(h + 1), pw.ge(1), pw.lt(w + 1)), x[cc, ph - 1, pw - 1], 0.0), name="pad")
    rc, rh, rw = te.reduce_axis(c, "rc"), te.reduce_axis(3, "rh"), te.reduce_axis(3, "rw")
    out = te.compute((f, h, w), lambda ff, oh, ow: te.sum(pad[rc, oh + rh, ow + rw] * wt[ff, rc, rh, rw],
                                                          axis=[rc, rh, rw]), name="conv")
    return tg.Workload([x, wt], [out])


def conv_reference(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
    c, h, w = x.shape
    p = np.zeros((c, h + 2, w + 2))
    p[:, 1:-1, 1:-1] = x
    out = np.zeros((wt.shape[0], h, w))
    for rh in range(3):
        for rw in range(3):
            out += np.einsum("fc,chw->fhw", wt[:, :, rh, rw], p[:, rh:rh + h, rw:rw + w])
    return out


def softmax(m: int = 5, n: int = 7) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    k1, k2 = te.reduce_axis(n, "k1"), te.reduce_axis(n, "k2")
    mx = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="mx")
    e = te.compute((m, n), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
    s = te.compute((m,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    out = te.compute((m, n), lambda i, j: e[i, j] / s[i], name="out")
    return tg.Workload([x], [out])


def softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def inputs_for(wl: tg.Workload, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype("float32") for t in wl.inputs]


def assert_same_as_unscheduled(sch: tg.Schedule, arrays: list[np.ndarray], reference: np.ndarray | None = None) -> None:
    got = interpret(sch, *arrays)
    want = interpret(sch.workload, *arrays)
    assert not np.isnan(got).any(), "some output element was never written"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if reference is not None:
        np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4)
