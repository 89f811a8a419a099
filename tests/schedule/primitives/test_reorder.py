

def test_reorder_refuses_to_move_a_vectorized_loop_outward():
    """Found by the schedule fuzz: the result failed the verifier (a vectorized loop around loops)."""
    import pytest

    import tilegraph as tg
    from tilegraph import te

    x = te.placeholder((3, 4), name="X")
    t = te.compute((3, 4), lambda i, j: x[i, j] + 1.0, name="T")
    sch = tg.Schedule(tg.Workload([x], [t]))
    i0, i1 = sch.split("i", [None, 1])
    sch.vectorize("j")
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="must stay innermost"):
        sch.reorder("j", i1, i0)
    assert sch.func is before
