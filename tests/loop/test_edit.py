"""loop/edit.py: edits build changed copies, share what did not change, and keep the meaning."""

from dataclasses import replace

import numpy as np

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.edit import map_exprs, replace_buffer, rewrite_stmt, substitute_stmt, transform_with_ranges
from tilegraph.loop.interpret import run_func
from tilegraph.loop.ir import Buffer, BufferStore
from tilegraph.loop.visit import blocks, find_loop, walk_stmts
from tilegraph.te.expr import Const, Var


def _func():
    a = te.placeholder((4, 6), name="A")
    return tg.Schedule(tg.Workload([a], [te.compute((4, 6), lambda i, j: a[i, j] * 2.0, name="B")])).func


def test_an_edit_that_changes_nothing_returns_the_same_tree():
    f = _func()
    assert rewrite_stmt(f.body, lambda s: None) is f.body
    assert transform_with_ranges(f.body, lambda s, r: None) is f.body
    assert substitute_stmt(f.body, {}) is f.body


def test_substitution_simplifies_and_ranges_are_the_enclosing_loops():
    f = _func()
    i = find_loop(f, "i").var
    fixed = substitute_stmt(find_loop(f, "j"), {i: Const(2, i.dtype)})
    assert all(Var("i") not in b.bindings for b in blocks(fixed)) and Const(2, i.dtype) in blocks(fixed)[0].bindings
    seen = {}
    transform_with_ranges(f.body, lambda s, r: seen.update({type(s).__name__: dict(r)}) if isinstance(s, BufferStore)
                          else None)
    assert seen["BufferStore"] == {"i": (0, 3), "j": (0, 5)}
    assert map_exprs(f.body, lambda e: e) is not f.body  # map_exprs rebuilds every holder, by contract


def test_replace_buffer_points_stores_elsewhere_and_keeps_the_meaning():
    f = _func()
    out = f.buffer("B")
    other = Buffer("B2", out.shape, out.dtype)
    body = replace_buffer(f.body, "B", other, loads=False)
    assert {s.buffer.name for s in walk_stmts(body) if isinstance(s, BufferStore)} == {"B2"}
    g = replace(f, body=body, params=tuple(other if b.name == "B" else b for b in f.params))
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    y = np.full((4, 6), np.nan, np.float32)  # poisoned: every element must be written
    run_func(g, {"A": x, "B2": y})
    np.testing.assert_allclose(y, x * 2.0)
