"""lower_cross_thread_reduction: lane partials, AllReduce and a store by every lane; the reduced
intermediate becomes per-thread only where each thread reads exactly what its lanes stored."""

from tilegraph import dtype as dt
from tilegraph import workloads
from tilegraph.loop.ir import Allocate, AllReduce, Buffer, BufferStore, For, Seq
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu import lower_cross_thread_reduction as pass_
from tilegraph.lower.gpu.pipeline import GPU_PASSES
from tilegraph.schedule.gpu_rows import row_gpu_schedule
from tilegraph.target import Target
from tilegraph.te.expr import BufferLoad, Const, Var

F32 = dt.float32


def _before_pass(spec):
    func = row_gpu_schedule(workloads.from_spec(spec), 2).func
    for name, run in GPU_PASSES:
        if name == "lower_cross_thread_reduction":
            return func
        func = run(func, Target("opencl"))
    raise AssertionError("pass not in the pipeline")


def test_each_reduction_gets_a_lane_register_and_one_allreduce():
    after = pass_.run(_before_pass("softmax:5,37"))
    reduces = [s for s in walk_stmts(after.body) if isinstance(s, AllReduce)]
    assert [(r.combiner, r.width) for r in reduces] == [("max", 32), ("sum", 32)]
    local = {s.buffer.name for s in walk_stmts(after.body) if isinstance(s, Allocate) and s.buffer.scope == "local"}
    assert {"softmax_max", "softmax_expsum", "softmax_max_lane", "softmax_expsum_lane"} <= local


def test_an_intermediate_read_at_another_element_stays_shared_by_the_threads():
    m = Buffer("m", (2,), F32)
    out = Buffer("out", (2,), F32)
    tx = Var("tx")
    body = For(tx, 32, "threadIdx.x", Seq((BufferStore(m, (Const(0),), Const(1.0, F32)),
                                            BufferStore(out, (Const(0),), BufferLoad(m, (Const(1),))))))
    alloc = Allocate(m, body)
    assert pass_._per_thread(alloc, "m", 32) is alloc
    same = Allocate(m, For(tx, 32, "threadIdx.x", Seq((BufferStore(m, (Const(0),), Const(1.0, F32)),
                                                      BufferStore(out, (Const(0),), BufferLoad(m, (Const(0),)))))))
    assert pass_._per_thread(same, "m", 32).buffer.scope == "local"
    assert pass_._per_thread(same, "m", 16) is same  # other lanes than the reduction's


def test_a_read_beside_the_lanes_runs_in_lane_0_and_the_sum_stays_per_thread():
    """A matrix-vector product's epilogue reads the sum beside the lanes' loop: it gets a lanes loop
    of its own, lane 0 running it, and the sum becomes per-thread; outside a kernel nothing moves."""
    from tilegraph.loop.ir import IfThenElse

    m, out = Buffer("m", (1,), F32), Buffer("out", (1,), F32)
    tx, bx = Var("tx"), Var("bx")
    reduce_ = For(tx, 32, "threadIdx.x", BufferStore(m, (Const(0),), Const(1.0, F32)))
    epilogue = BufferStore(out, (Const(0),), BufferLoad(m, (Const(0),)))
    alloc = Allocate(m, Seq((reduce_, epilogue)))
    kernel = For(bx, 2, "blockIdx.x", alloc)
    after = pass_._per_thread(kernel, "m", 32)
    (new_alloc,) = [s for s in walk_stmts(after) if isinstance(s, Allocate)]
    assert new_alloc.buffer.scope == "local"
    lanes = [s for s in walk_stmts(new_alloc.body) if isinstance(s, For) and s.kind == "threadIdx.x"]
    assert len(lanes) == 2 and isinstance(lanes[1].body, IfThenElse)  # the epilogue, in lane 0 only
    assert pass_._per_thread(alloc, "m", 32) is alloc  # not inside a kernel: left as it was
