"""loop/from_te.py: a workload's naive loop nest, one block per compute, names kept."""

import numpy as np

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.from_te import workload_to_func
from tilegraph.loop.ir import Block, For
from tilegraph.loop.visit import walk_stmts


def _two_stage():
    a = te.placeholder((3, 4), name="A")
    b = te.compute((3, 4), lambda i, j: a[i, j] + 1.0, name="B")
    k = te.reduce_axis(4, "k")
    return tg.Workload([a], [te.compute((3,), lambda i: te.sum(b[i, k], axis=k), name="C")])


def test_params_allocs_blocks_and_unique_loop_names():
    f = workload_to_func(_two_stage())
    assert [b.name for b in f.params] == ["A", "C"] and [b.name for b in f.allocs] == ["B"]
    blocks = [s for s in walk_stmts(f.body) if isinstance(s, Block)]
    assert [b.name for b in blocks] == ["B", "C"]
    loops = [s.var.name for s in walk_stmts(f.body) if isinstance(s, For)]
    assert loops == ["i", "j", "i_1", "k"], "loop variables are unique in a Func"
    assert [iv.kind for iv in blocks[1].iter_vars] == ["spatial", "reduce"] and blocks[1].init is not None


def test_the_naive_nest_means_the_computation():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(tg.interpret(workload_to_func(_two_stage()), x), (x + 1).sum(1))
