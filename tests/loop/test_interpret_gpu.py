import numpy as np
import pytest

from tilegraph import dtype as dt
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import Barrier, Buffer, BufferStore, For, Func, seq
from tilegraph.te.expr import BufferLoad, Var


def _swap_func(with_barrier: bool) -> Func:
    """The interpret_gpu docstring example: S[tx] = A[tx]; (barrier;) B[tx] = S[1 - tx]."""
    a = Buffer("A", (2,), dt.float32)
    b = Buffer("B", (2,), dt.float32)
    s = Buffer("S", (2,), dt.float32, scope="shared")
    tx = Var("tx")
    stmts = [BufferStore(s, (tx,), BufferLoad(a, (tx,))), BufferStore(b, (tx,), BufferLoad(s, (1 - tx,)))]
    if with_barrier:
        stmts.insert(1, Barrier())
    return Func("swap", (a, b), For(tx, 2, "threadIdx.x", seq(*stmts)), allocs=(s,))


@pytest.mark.parametrize("order", ["lockstep", "serial", "reversed", "random"])
def test_barrier_separates_thread_phases(order):
    x = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(interpret(_swap_func(True), x, thread_order=order, seed=1), x[::-1])


def test_missing_barrier_reads_unwritten_shared_memory_in_serial_order():
    x = np.array([1.5, -2.0], np.float32)
    out = interpret(_swap_func(False), x, thread_order="serial")
    assert np.isnan(out[0]) and out[1] == x[0]  # thread 0 ran before thread 1 wrote S[1]
    out = interpret(_swap_func(False), x, thread_order="reversed")
    assert out[0] == x[1] and np.isnan(out[1])
