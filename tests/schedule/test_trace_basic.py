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
