"""promote_registers: a local buffer used only as whole aligned vectors becomes vector registers."""

import numpy as np

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, Func, seq
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import promote_registers
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Const, Ramp


def _acc_func(offsets=(0, 16), lanes=16):
    x, y = Buffer("X", (32,), dt.float32), Buffer("Y", (32,), dt.float32)
    acc = Buffer("acc", (32,), dt.float32, scope="local")

    def vec(at):
        return (Ramp(Const(at), 1, lanes),)

    twice = Broadcast(Const(2.0, dt.float32), lanes)
    body = seq(*(BufferStore(acc, vec(o), BinOp("mul", BufferLoad(x, vec(o)), twice)) for o in offsets),
               *(BufferStore(y, vec(o), BufferLoad(acc, vec(o))) for o in offsets))
    return Func("f", (x, y), Allocate(acc, body))


def _acc_dtype(func):
    return next(s.buffer.dtype for s in walk_stmts(func.body) if isinstance(s, Allocate))


def test_aligned_whole_vectors_become_registers_and_the_meaning_is_kept():
    func = _acc_func()
    promoted = promote_registers.run(func, None)
    assert _acc_dtype(func) == dt.float32 and _acc_dtype(promoted) == dt.float32.with_lanes(16)
    x = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(tg.interpret(promoted, x), x * 2)


def test_a_misaligned_access_keeps_the_buffer_in_memory():
    func = _acc_func(offsets=(0, 8), lanes=16)
    assert _acc_dtype(promote_registers.run(func, None)) == dt.float32
