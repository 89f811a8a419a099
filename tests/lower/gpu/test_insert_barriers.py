"""insert_barriers: barriers for read-after-write and write-after-read hazards on shared memory."""

from tests.lower.gpu.stages import means_matmul, stages
from tilegraph.loop.ir import Barrier
from tilegraph.loop.visit import walk_stmts


def test_the_gemm_gets_its_two_barriers_and_needs_them():
    wl, s = stages()
    before, after = s["hoist_shared_allocs"], s["insert_barriers"]
    assert not any(isinstance(x, Barrier) for x in walk_stmts(before.body))
    assert sum(isinstance(x, Barrier) for x in walk_stmts(after.body)) >= 2
    assert means_matmul(wl, after, order="serial") and means_matmul(wl, after, order="reversed")
    assert means_matmul(wl, after, order="random")
    assert means_matmul(wl, before) and not means_matmul(wl, before, order="serial"), \
        "without barriers a serial thread order reads tiles other threads have not copied yet"
