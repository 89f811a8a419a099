"""schedule/primitives/nest.py: tree editing the data-movement primitives share."""

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import matmul_relu
from tilegraph.loop.ir import Block, For
from tilegraph.loop.visit import find_block, find_loop, walk_stmts
from tilegraph.schedule.primitives.nest import (
    block_nest,
    conjunction,
    fresh_block_name,
    fresh_loop_vars,
    is_alloc,
    loops_between,
    loops_enclosing,
    path_to,
    readers,
    remove_nest,
    writers,
)
from tilegraph.te.expr import Var
from tilegraph.te.printer import expr_str


def _func():
    return tg.Schedule(matmul_relu(4, 5, 3)).func


def test_paths_and_enclosing_loops():
    f = _func()
    c = find_block(f, "C")
    path = path_to(f, c)
    assert path[0] is f.body and path[-1] is c
    assert [lp.var.name for lp in loops_enclosing(f, c)] == ["i", "j", "k"]
    assert [lp.var.name for lp in loops_between(f, find_loop(f, "i"), c)] == ["j", "k"]


def test_a_blocks_nest_is_removed_whole():
    f = _func()
    nest, _ = block_nest(f, find_block(f, "D"))
    assert isinstance(nest, For) and nest.var.name == "i_1"
    g = remove_nest(f, find_block(f, "D"))
    assert [b.name for b in _blocks(g)] == ["C"]


def test_dataflow_queries_and_fresh_names():
    f = _func()
    assert readers(f.body, "C") == ["C", "D"] and writers(f.body, "C") == ["C"] and is_alloc(f, "C") and not is_alloc(f, "A")
    assert fresh_block_name(f, "C") == "C_1" and fresh_block_name(f, "E") == "E"
    assert [v.name for v in fresh_loop_vars(f, ["i", "ax0"])] == ["i_2", "ax0"]
    assert expr_str(conjunction([Var("i").lt(3), Var("j").lt(4)])) == "((i < 3) && (j < 4))"


def _blocks(f):
    return [s for s in walk_stmts(f.body) if isinstance(s, Block)]
