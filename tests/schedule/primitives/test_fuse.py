"""fuse: perfectly nested consecutive loops become one; the meaning is kept, illegal fusions refused."""

import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul


def test_fuse_two_spatial_loops_keeps_the_meaning():
    wl = matmul(4, 5, 3)
    sch = tg.Schedule(wl)
    i, j, _ = sch.loops("C")
    fused = sch.fuse(i, j)
    assert fused == "i_j_fused" and "for i_j_fused in range(20)" in str(sch)
    assert "// 5" in str(sch) and "% 5" in str(sch)
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))


def test_fuse_then_split_round_trips_through_replay():
    wl = matmul(6, 4, 3)
    sch = tg.Schedule(wl)
    i, j, _ = sch.loops("C")
    sch.split(sch.fuse(i, j), 8)
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


@pytest.mark.parametrize("pick, message", [
    (lambda loops: [loops[0]], "at least two"),
    (lambda loops: [loops[0], loops[2]], "k is not the only statement in the body of i"),
    (lambda loops: [loops[1], loops[0]], "i is not the only statement in the body of j"),
    (lambda loops: [loops[1], loops[2]], r"mixes reduce loops \(k\) with spatial ones"),
])
def test_illegal_fusions_are_refused(pick, message):
    sch = tg.Schedule(matmul(4, 5, 3))
    with pytest.raises(tg.ScheduleError, match=message):
        sch.fuse(*pick(list(sch.loops("C"))))


def test_a_spatial_and_reduce_loop_never_fuse():
    """What the property test found (matmul(1, 2, 3)): fuse(j, k), split by 2 and the halves swapped
    visited (j=1, k=1) before (j=1, k=0), where the init runs, and lost a partial sum."""
    sch = tg.Schedule(matmul(1, 2, 3))
    before = sch.func
    _, j, k = sch.loops("C")
    with pytest.raises(tg.ScheduleError, match="fuse loops of one kind"):
        sch.fuse(j, k)
    assert sch.func == before and not sch.trace.instructions
