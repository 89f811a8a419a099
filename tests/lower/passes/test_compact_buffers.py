import numpy as np

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import conv_reference, conv_with_pad, inputs_for, softmax
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import Allocate
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.compact_buffers import run


def _allocations(func):
    return {s.buffer.name: s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate)}


def test_compact_pad_tile_under_conv_row():
    wl = conv_with_pad(2, 7, 5, 3)
    sch = tg.Schedule(wl)
    ff, oh, *_ = sch.loops("conv")
    sch.compute_at("pad", oh)
    out = run(sch.func)
    assert not out.allocs
    assert _allocations(out)["pad"].shape == (2, 3, 7)
    x, w = inputs_for(wl)
    got = interpret(out, x, w, outputs=1)
    np.testing.assert_allclose(got, conv_reference(x.astype(np.float64), w.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_unscheduled_intermediates_keep_full_shape_at_root():
    wl = softmax(4, 6)
    sch = tg.Schedule(wl)
    out = run(sch.func)
    allocs = _allocations(out)
    assert allocs["e"].shape == (4, 6) and allocs["mx"].shape == (4,)
    (x,) = inputs_for(wl)
    np.testing.assert_allclose(interpret(out, x, outputs=1), interpret(wl, x), rtol=1e-6)


def test_reduction_accumulator_scope_stays_above_its_reduce_loop():
    wl = softmax(4, 6)
    sch = tg.Schedule(wl)
    i_out = sch.loops("out")[0]
    for blk in ("s", "e", "mx"):
        sch.compute_at(blk, i_out)
    out = run(sch.func)
    allocs = _allocations(out)
    assert allocs["s"].shape == (1,) and allocs["e"].shape == (1, 6)
    (x,) = inputs_for(wl)
    np.testing.assert_allclose(interpret(out, x, outputs=1), interpret(wl, x), rtol=1e-6)
