"""lower_blocks: blocks become their bodies; predicates stay only where the loop ranges cannot prove them."""

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.ir import Block, IfThenElse
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import lower_blocks, simplify
from tilegraph.te.printer import expr_str


def _split(factor):
    x = te.placeholder((10,), name="X")
    y = te.compute((10,), lambda i: x[i] + 1.0, name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    sch.split(sch.loops(y)[0], factor)
    return sch


def test_guard_kept_only_when_not_provable():
    out = simplify.run(lower_blocks.run(_split(4).func, None), None)
    assert sum(isinstance(s, IfThenElse) for s in walk_stmts(out.body)) == 1
    out = lower_blocks.run(_split(5).func, None)
    assert not any(isinstance(s, (IfThenElse, Block)) for s in walk_stmts(out.body))


def test_an_init_left_in_its_block_runs_under_the_first_reduction_step():
    a = te.placeholder((4, 3), name="A")
    k = te.reduce_axis(3, "k")
    sch = tg.Schedule(tg.Workload([a], [te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")]))
    out = lower_blocks.run(sch.func, None)
    conds = [s.cond for s in walk_stmts(out.body) if isinstance(s, IfThenElse)]
    assert [expr_str(c) for c in conds] == ["(k == 0)"]
