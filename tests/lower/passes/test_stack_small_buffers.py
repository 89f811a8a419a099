import numpy as np
import pytest

import tilegraph as tg
from tilegraph.loop.ir import Allocate
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import compact_buffers, stack_small_buffers
from tilegraph.testing import random_inputs, reference_outputs


def _softmax_rows_schedule(rows=5, cols=33):
    x = tg.te.placeholder((rows, cols), name="x")
    wl = tg.Workload([x], [tg.ops.softmax(x)])
    sch = tg.Schedule(wl)
    out = wl.outputs[0]
    row = sch.loops(out)[0]
    for name in reversed(sch.block_names()[:-1]):  # the reduction stages (consumers first), per row
        sch.compute_at(name, row)
    return wl, sch


def _allocations(func):
    return {s.buffer.name: s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate)}


def test_small_per_row_buffers_move_to_the_stack_and_big_ones_stay():
    _, sch = _softmax_rows_schedule()
    compacted = compact_buffers.run(sch.func)
    assert any(b.scope == "global" for b in _allocations(compacted).values())
    stacked = _allocations(stack_small_buffers.run(compacted))
    assert stacked and all(b.scope == "local" for b in stacked.values())



def test_a_panel_larger_than_the_limit_stays_on_the_heap():
    k = stack_small_buffers.STACK_LIMIT_BYTES // (4 * 16) + 1  # a k x 16 fp32 panel just over the limit
    a, b = tg.te.placeholder((8, k), name="A"), tg.te.placeholder((k, 32), name="B")
    c = tg.ops.matmul(a, b, name="C")
    sch = tg.Schedule(tg.Workload([a, b], [c]))
    i, j, r = sch.loops(c)
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(jo, i, r, ji)
    sch.compute_at(sch.cache_read(c, "B", "global"), jo)
    after = _allocations(stack_small_buffers.run(compact_buffers.run(sch.func)))
    assert after["B_global"].scope == "global" and after["B_global"].size == k * 16


@pytest.mark.needs_cc
def test_stacked_softmax_compiles_and_matches_reference():
    wl, sch = _softmax_rows_schedule(rows=7, cols=33)
    kernel = tg.build(sch)
    assert "tgh_alloc" not in kernel.source.split("void tg_")[-1]
    x = random_inputs(wl, seed=3)
    out = np.full(wl.outputs[0].shape, np.nan, dtype=np.float32)
    kernel(*x, out=(out,))
    np.testing.assert_allclose(out, reference_outputs(wl, x)[0], rtol=1e-5, atol=1e-6)
