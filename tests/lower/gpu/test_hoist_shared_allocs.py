"""hoist_shared_allocs: shared buffers are allocated once per kernel, under the innermost blockIdx loop."""

from tests.lower.gpu.stages import means_matmul, stages
from tilegraph.loop.ir import Allocate, For
from tilegraph.loop.visit import walk_stmts


def test_shared_allocations_sit_directly_under_the_block_loops():
    wl, s = stages()
    after = s["hoist_shared_allocs"]
    checked = 0
    for lp in walk_stmts(after.body):
        if isinstance(lp, For) and lp.kind.startswith("blockIdx") and not (
                isinstance(lp.body, For) and lp.body.kind.startswith("blockIdx")):
            top = lp.body
            names = []
            while isinstance(top, Allocate):
                names.append(top.buffer.name)
                top = top.body
            assert {"a_shared", "b_shared"} <= set(names)
            checked += 1
    assert checked == 1, "the GEMM has one kernel, so one innermost blockIdx loop"
    assert means_matmul(wl, after)
