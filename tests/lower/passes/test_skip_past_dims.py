"""skip_past_dims and relax_dims_guards: where the guards of run-time dims end up, and that the
program means the same below the run-time extents (interpreter before and after the passes)."""

from __future__ import annotations

import numpy as np

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.loop.interpret import run_func
from tilegraph.loop.ir import Block, For, IfThenElse
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import hoist_reduction_init, relax_dims_guards, skip_past_dims
from tilegraph.te.dims import dim, dims_array, reads_dims
from tilegraph.te.printer import expr_str


def _softmax(split: int):
    x = te.placeholder((6, dim("n", 40)), name="x")
    wl = te.Workload([x], [ops.softmax(x)])
    sch = tg.Schedule(wl)
    for block in ("softmax_max", "softmax_expsum"):
        (r,) = [lp for lp in sch.loops(block) if lp.startswith("r")]
        sch.split(r, [None, split])
    return wl, sch


def _passes(func):
    return relax_dims_guards.run(skip_past_dims.run(hoist_reduction_init.run(func, None), None), None)


def test_whole_tiles_below_the_bound_run_without_their_reduction_guard():
    _, sch = _softmax(8)
    lowered = _passes(sch.func)
    full = [s for s in walk_stmts(lowered.body) if isinstance(s, IfThenElse) and s.else_body is not None
            and reads_dims(s.cond)]
    assert full, "no full-tile branch"
    for branch in full:  # the full tile: no block in it tests the dims; the other branch keeps the guard
        assert not any(isinstance(b, Block) and reads_dims(b.predicate) for b in walk_stmts(branch.then_body))
        assert any(isinstance(b, Block) and reads_dims(b.predicate) for b in walk_stmts(branch.else_body))
    loops = [s.var.name for s in walk_stmts(lowered.body) if isinstance(s, For)]
    assert len(loops) == len(set(loops))  # the copies' loops were renamed


def test_the_passes_keep_the_meaning_below_the_extents():
    wl, sch = _softmax(16)
    rng = np.random.default_rng(0)
    for n in (1, 7, 16, 17, 40):
        x = np.full((6, 40), np.nan, np.float32)
        x[:, :n] = rng.standard_normal((6, n))
        outs = []
        for func in (sch.func, _passes(sch.func)):
            arrays = {"x": x, "tg_dims": dims_array(wl.dims, {"n": n}), "softmax": np.full((6, 40), np.nan, np.float32)}
            run_func(func, arrays)
            outs.append(arrays["softmax"][:, :n])
        e = np.exp(x[:, :n] - x[:, :n].max(1, keepdims=True))
        np.testing.assert_allclose(outs[0], e / e.sum(1, keepdims=True), rtol=1e-5)
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, err_msg=f"n={n}")


def test_a_row_tile_past_the_bound_is_skipped_at_its_outermost_loop():
    m = dim("m", 32)
    a, b = te.placeholder((m, 8), name="A"), te.placeholder((8, 4), name="B")
    r = te.reduce_axis(8, "r")
    c = te.compute((m, 4), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    sch = tg.Schedule(te.Workload([a, b], [c]))
    io, ii = sch.split("i", [None, 8])
    lowered = _passes(sch.func)
    outer = next(s for s in walk_stmts(lowered.body) if isinstance(s, For) and s.var.name == io)
    assert isinstance(outer.body, IfThenElse) and expr_str(outer.body.cond).startswith(f"(({io} * 8) <")
    assert not any(isinstance(s, For) and s.var.name == ii and isinstance(s.body, IfThenElse) and reads_dims(s.body.cond)
                   for s in walk_stmts(lowered.body))  # no test per row
