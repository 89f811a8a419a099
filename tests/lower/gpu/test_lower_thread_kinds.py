"""lower_thread_kinds: vthread and vectorized loops become unrolled loops a thread runs itself."""

import tilegraph as tg
from tests.lower.gpu.stages import OPENCL
from tilegraph import workloads
from tilegraph.loop.ir import For
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu import lower_thread_kinds


def test_vthread_and_vectorized_loops_are_unrolled():
    wl = workloads.from_spec("matmul:16,8,16")
    sch = tg.Schedule(wl)
    i, j, _ = sch.loops("matmul")
    bi, vi = sch.split(i, [None, 2])
    bj, tj, vj = sch.split(j, [None, 4, 4])
    sch.bind(bi, "blockIdx.x")
    sch.bind(vi, "vthread")
    sch.bind(tj, "threadIdx.x")
    kinds_before = {lp.kind for lp in walk_stmts(sch.func.body) if isinstance(lp, For)}
    after = lower_thread_kinds.run(sch.func, OPENCL)
    kinds_after = {lp.kind for lp in walk_stmts(after.body) if isinstance(lp, For)}
    assert "vthread" in kinds_before and "vthread" not in kinds_after and "unrolled" in kinds_after
    assert {"blockIdx.x", "threadIdx.x"} <= kinds_after
