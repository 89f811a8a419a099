import pytest

import tilegraph as tg
from tilegraph import te


def _matmul(m=10, n=3, k=4):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C", tag="matmul")
    return tg.Workload([a, b], [c]), c


def test_replay_reproduces_ir_and_links_decisions():
    wl, c = _matmul()
    sch = tg.Schedule(wl, seed=3)
    i, j, k = sch.loops(c)
    f = sch.sample_tile(i, 2)
    io, ii = sch.split(i, f)
    sch.reorder(io, j, k, ii)
    sch.parallel(io)
    again = tg.Schedule.replay(wl, sch.trace.to_json())
    assert again.func == sch.func
    changed = tg.Schedule.replay(wl, sch.trace.with_decision(0, [1, 10]))
    assert "for i_1 in range(10)" in str(changed)


def test_replay_refuses_other_workload():
    wl, c = _matmul()
    other, _ = _matmul(m=11)
    sch = tg.Schedule(wl)
    sch.split(sch.loops(c)[0], 4)
    with pytest.raises(tg.ScheduleError, match="recorded for workload"):
        tg.Schedule.replay(other, sch.trace)


def test_parallel_reduction_loop_is_refused():
    wl, c = _matmul()
    sch = tg.Schedule(wl)
    with pytest.raises(tg.ScheduleError, match="reduction loop"):
        sch.parallel(sch.loops(c)[2])


def test_workload_key_is_structural():
    a, _ = _matmul()
    b, _ = _matmul()
    c, _ = _matmul(m=11)
    assert a.key == b.key != c.key


def test_unknown_blocks_loops_and_primitives_are_clear_errors():
    import pytest

    sch = tg.Schedule(_matmul_for_api())
    with pytest.raises(tg.ScheduleError, match="no block named 'X'"):
        sch.loops("X")
    with pytest.raises(tg.ScheduleError, match="no loop named 'q'"):
        sch.split("q", 2)
    with pytest.raises(tg.ScheduleError, match="unknown schedule primitive 'tile'"):
        sch.apply("tile", loop="i")


def test_copy_is_independent_and_sampled_values_link_instructions():
    sch = tg.Schedule(_matmul_for_api(), seed=3)
    i = sch.loops("C")[0]
    other = sch.copy()
    factors = sch.sample_tile(i, 2)
    sch.split(i, list(factors))
    assert len(other.trace) == 0 and other.func != sch.func
    split = sch.trace.instructions[-1]
    assert split.inputs["factors"] == [{"rv": "v0"}, {"rv": "v1"}], "the split names the decision it used"
    changed = sch.trace.with_decision(0, [1, 12])
    assert "range(12)" in str(tg.Schedule.replay(sch.workload, changed))


def _matmul_for_api():
    a, b = tg.te.placeholder((12, 5), name="A"), tg.te.placeholder((5, 7), name="B")
    r = tg.te.reduce_axis(5, "k")
    return tg.Workload([a, b], [tg.te.compute((12, 7), lambda i, j: tg.te.sum(a[i, r] * b[r, j], axis=r), name="C")])
