"""flatten_buffers: one-dimensional buffers indexed row-major over the storage shape."""

import numpy as np

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.loop.ir import Buffer, BufferStore
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import flatten_buffers, lower_blocks
from tilegraph.te.expr import Var


def test_flat_index_honours_padding():
    b = Buffer("C", (10, 3), dt.float32, padding=(0, 1))
    i, j = Var("i"), Var("j")
    assert flatten_buffers.flat_buffer(b).shape == (40,)
    assert flatten_buffers.flat_index(b, (i, j)) == (i * 4) + j


def test_every_buffer_is_flat_after_the_pass_and_the_meaning_is_kept():
    x = te.placeholder((3, 5), name="X")
    y = te.compute((5, 3), lambda i, j: x[j, i] * 2.0, name="Y")
    func = flatten_buffers.run(lower_blocks.run(tg.Schedule(tg.Workload([x], [y])).func, None), None)
    assert all(len(b.shape) == 1 for b in func.params)
    assert all(len(s.indices) == 1 for s in walk_stmts(func.body) if isinstance(s, BufferStore))
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.testing.assert_array_equal(np.asarray(tg.interpret(func, a.ravel())).reshape(5, 3), a.T * 2)
