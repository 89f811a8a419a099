"""loop/visit.py: statement traversal, rewriting, search by name and the expressions a statement holds."""

import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.edit import map_stmt_exprs, replace_node
from tilegraph.loop.ir import Block, BufferStore, For, IfThenElse
from tilegraph.loop.visit import (
    blocks,
    find_block,
    find_loop,
    loads_under,
    loop_names,
    loops_above,
    reduce_loop_of,
    stmt_exprs,
    walk_stmts,
)
from tilegraph.te.expr import Const, Var


def _func():
    a = te.placeholder((4, 3), name="A")
    k = te.reduce_axis(3, "k")
    return tg.Schedule(tg.Workload([a], [te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")])).func


def test_search_by_name_and_enclosing_loops():
    f = _func()
    assert find_loop(f, "k").extent == 3 and find_block(f, "S").name == "S"
    assert [lp.var.name for lp in loops_above(f, "S")] == ["i", "k"] and loop_names(f) == {"i", "k"}
    with pytest.raises(KeyError):
        find_loop(f, "nope")
    assert reduce_loop_of(find_loop(f, "k")) == ["S"] and reduce_loop_of(find_loop(f, "i")) == []


def test_statement_expressions_and_loads():
    f = _func()
    blk = blocks(f.body)[0]
    assert stmt_exprs(blk) == (*blk.bindings, blk.predicate)
    store = next(s for s in walk_stmts(blk.body) if isinstance(s, BufferStore))
    assert stmt_exprs(store) == (*store.indices, store.value)
    assert stmt_exprs(IfThenElse(Const(True), store)) == (Const(True),)
    assert {load.buffer.name for load in loads_under(f.body)} == {"A", "S"}


def test_rewrites_return_new_trees():
    f = _func()
    k = find_loop(f, "k")
    g = replace_node(f, k, For(k.var, k.extent, "unrolled", k.body))
    assert find_loop(g, "k").kind == "unrolled" and find_loop(f, "k").kind == "serial"
    renamed = map_stmt_exprs(f.body, lambda e: Var("z") if e == Var("i") else None)
    assert any(Var("z") in b.bindings for b in blocks(renamed)) and isinstance(blocks(renamed)[0], Block)
