"""AllReduce: the xor butterfly over threadIdx.x lanes, the same in every thread order; verified."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph.loop.interpret_gpu import butterfly
from tilegraph.loop.ir import Allocate, AllReduce, Buffer, BufferStore, For, Func, Seq
from tilegraph.loop.printer import func_str
from tilegraph.loop.verify import VerifyError, verify
from tilegraph.te.expr import BufferLoad, Const, Var


def _func(combiner="sum", width=8, lanes=8, rows=3, scope="local"):
    """out[ty, tx] = combiner over the lanes of tx's group of x[ty, lane]."""
    x = Buffer("x", (rows, lanes), dt.float32)
    out = Buffer("out", (rows, lanes), dt.float32)
    acc = Buffer("acc", (1,), dt.float32, scope)
    ty, tx = Var("ty"), Var("tx")
    body = Allocate(acc, Seq((
        BufferStore(acc, (Const(0),), BufferLoad(x, (ty, tx))),
        AllReduce(acc, combiner, width),
        BufferStore(out, (ty, tx), BufferLoad(acc, (Const(0),))),
    )))
    return Func("f", (x, out), For(Var("b"), 1, "blockIdx.x", For(ty, rows, "threadIdx.y", For(tx, lanes, "threadIdx.x", body))))


@pytest.mark.parametrize("combiner,ref", [("sum", np.sum), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("width", [1, 2, 8])
def test_every_lane_gets_its_groups_combination_in_every_order(combiner, ref, width):
    func = _func(combiner, width)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    want = np.repeat(ref(x.reshape(3, 8 // width, width), axis=2), width, axis=1)
    for order in ("lockstep", "serial", "reversed", "random"):
        np.testing.assert_allclose(tg.interpret(func, x, thread_order=order), want, rtol=1e-6, err_msg=order)


def test_the_butterfly_order_is_the_definition():
    v = np.array([1e8, 1.0, -1e8, 1.0], dtype=np.float32)
    # m = 2 pairs lanes (0, 2) and (1, 3), then m = 1 pairs (0, 1): (1e8 - 1e8) + (1 + 1) = 2 in
    # float32, where the sequential sum ((1e8 + 1) - 1e8) + 1 rounds to 1
    got = butterfly(v.copy(), 0, "sum", 4)
    assert np.all(got == np.float32(2.0))


def test_allreduce_prints_and_is_verified():
    assert "allreduce(acc, max, width=8)" in func_str(_func("max"))
    verify(_func())
    with pytest.raises(VerifyError, match="power of two"):
        verify(_func(width=6))
    with pytest.raises(VerifyError, match="must be local"):
        verify(_func(scope="shared"))
    with pytest.raises(VerifyError, match="combiner"):
        verify(_func(combiner="xor"))
