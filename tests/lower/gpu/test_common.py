"""lower/gpu/common.py: thread loops and the shared buffers a statement reads and writes."""

from tests.lower.gpu.stages import stages
from tilegraph.lower.gpu.common import allocated, shared_accesses, thread_loops


def test_shared_accesses_and_thread_loops():
    _, s = stages()
    func = s["hoist_shared_allocs"]
    reads, writes = shared_accesses(func.body)
    assert reads == writes == frozenset({"a_shared", "b_shared"})
    assert {lp.kind for lp in thread_loops(func.body)} == {"threadIdx.x", "threadIdx.y"}
    assert {a.buffer.name for a in allocated(func.body, "shared")} == {"a_shared", "b_shared"}
