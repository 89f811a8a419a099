"""TileProduct (loop/ir.py): the interpreter's meaning on hand-built Funcs (row tiles at their own
offsets, K groups, a nest of steps, int32 wrapping), the printer, the verifier, and the lane
analysis keeping the loops around it serial."""

import numpy as np
import pytest

from tilegraph import dtype as dt
from tilegraph.loop.interpret import interpret, run_func
from tilegraph.loop.ir import Buffer, For, Func, TileProduct
from tilegraph.loop.lanes import plan_loops
from tilegraph.loop.printer import func_str
from tilegraph.loop.verify import VerifyError, verify
from tilegraph.te.expr import Const, Var


def _meaning(acc, a, b, t: TileProduct, acc_at=0, a_at=0, b_at=0):  # noqa: ANN001, ANN201
    """The docstring's loops, in Python integers / float64."""
    out = acc.astype(np.float64 if acc.dtype.kind == "f" else np.int64).copy()
    points = [()]
    for extent, sa, sb in t.steps:
        points = [(*p, (s, sa, sb)) for p in points for s in range(extent)]
    first = 0
    for rows, offset in t.a_tiles:
        for r in range(rows):
            m = first + r
            for n in range(t.cols):
                total = 0
                for p in points:
                    da, db = sum(s * sa for s, sa, _ in p), sum(s * sb for s, _, sb in p)
                    for k in range(t.depth):
                        av = a[a_at + offset + r * t.a_ld + k + da]
                        bv = b[b_at + (k // t.group) * t.b_ld + n * t.group + k % t.group + db]
                        total += float(av) * float(bv) if acc.dtype.kind == "f" else int(av) * int(bv)
                out[acc_at + m * t.acc_ld + n] += total
        first += rows
    return out


def _func(t: TileProduct, loop: bool = False) -> Func:
    body = t if not loop else For(Var("i", dt.int32), 2, "serial", t)
    return Func("f", (t.a, t.b, t.acc), body)


def test_integer_tile_products_sum_exactly_and_wrap(rng):
    a = Buffer("a", (600,), dt.uint8)
    b = Buffer("b", (900,), dt.int8)
    acc = Buffer("acc", (64,), dt.int32)
    t = TileProduct(acc, Const(0), 9, a, Const(3), 40, ((2, 0), (3, 200)), b, Const(5), 40, 9, 8, 4,
                    ((2, 100, 300), (3, 8, 80)))
    verify(_func(t))
    av = rng.integers(0, 256, 600).astype(np.uint8)
    bv = rng.integers(-128, 128, 900).astype(np.int8)
    start = rng.integers(-2**31, 2**31, 64).astype(np.int32)
    start[0] = 2**31 - 1  # the first sum wraps past int32
    buffers = {"a": av, "b": bv, "acc": start.copy()}
    run_func(_func(t), buffers)
    want = _meaning(start, av, bv, t, a_at=3, b_at=5)
    np.testing.assert_array_equal(buffers["acc"], ((want + 2**31) % 2**32 - 2**31).astype(np.int32))


def test_bfloat16_tile_products_round_the_exact_sum_once(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = Buffer("a", (256,), dt.bfloat16)
    b = Buffer("b", (800,), dt.bfloat16)
    acc = Buffer("acc", (48,), dt.float32)
    t = TileProduct(acc, Const(0), 16, a, Const(0), 32, ((3, 0),), b, Const(0), 32, 16, 32, 2, ((2, 96, 256),))
    av = rng.standard_normal(256).astype(ml_dtypes.bfloat16)
    bv = rng.standard_normal(800).astype(ml_dtypes.bfloat16)
    got = interpret(_func(t), av, bv, outputs=1)  # acc starts poisoned: NaN propagates
    assert np.isnan(got).all()
    buffers = {"a": av.view(np.uint16), "b": bv.view(np.uint16), "acc": np.ones(48, np.float32)}
    run_func(_func(t), buffers)
    np.testing.assert_array_equal(buffers["acc"], _meaning(np.ones(48, np.float32), av.astype(np.float64),
                                                           bv.astype(np.float64), t).astype(np.float32))


def test_printer_verifier_and_lanes():
    a, b, acc = Buffer("a", (64,), dt.uint8), Buffer("b", (64,), dt.int8), Buffer("acc", (16,), dt.int32)
    t = TileProduct(acc, Const(0), 4, a, Var("i", dt.int32), 16, ((4, 0),), b, Const(0), 16, 4, 4, 4)
    func = _func(t, loop=True)
    verify(func)
    assert "tile_product(acc[0, ld 4] += a[i, ld 16, rows 4@0] . b[0, ld 16, groups of 4], 4 x 4 x 4" in func_str(func)
    (plan,) = plan_loops(func, True, {"a", "b", "acc"}).values()
    assert not plan.lane  # the loop around a tile product runs serially
    with pytest.raises(VerifyError, match="not positive, or the depth not whole groups"):
        verify(_func(TileProduct(acc, Const(0), 4, a, Const(0), 16, ((4, 0),), b, Const(0), 16, 4, 6, 4)))
    with pytest.raises(VerifyError, match="variable i"):
        verify(_func(t))  # its origin reads a variable no loop binds
