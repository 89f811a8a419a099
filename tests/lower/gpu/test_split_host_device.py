

def test_a_global_buffer_allocated_twice_at_the_top_level_is_refused():
    """Found by the schedule fuzz: an unrolled top-level loop around a compute_at-ed producer is
    expanded into two allocations of one buffer, which the kernels would have shared by name."""
    import pytest

    import tilegraph as tg
    from tests.schedule.primitives.prim_workloads import matmul_relu
    from tilegraph.errors import LoweringError
    from tilegraph.lower.gpu.pipeline import lower_gpu

    wl = matmul_relu(2, 1, 1)
    sch = tg.Schedule(wl)
    i, j = sch.loops("D")
    sch.compute_at("C", j)
    sch.unroll(i)
    with pytest.raises(LoweringError, match="allocated more than once"):
        lower_gpu(sch.func, tg.Target("opencl"))
