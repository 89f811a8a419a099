"""compact_gpu_buffers: shared tiles cover every thread of a block, local tiles one thread."""

from tests.lower.gpu.stages import means_matmul, stages
from tilegraph.loop.ir import Allocate
from tilegraph.loop.visit import walk_stmts


def test_buffers_are_allocated_where_used_and_shrunk():
    wl, s = stages()
    after = s["compact_gpu_buffers"]
    assert not after.allocs and s["input"].allocs
    shapes = {a.buffer.name: (a.buffer.scope, a.buffer.shape) for a in walk_stmts(after.body) if isinstance(a, Allocate)}
    assert shapes["a_shared"] == ("shared", (8, 4)) and shapes["b_shared"] == ("shared", (4, 8))
    assert shapes["matmul_local"] == ("local", (2, 2)), "a thread's register tile"
    assert means_matmul(wl, after)
