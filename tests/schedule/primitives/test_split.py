"""split: factors, the inferred factor, tail guards and the limits that keep indices in range."""

import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul
from tilegraph.loop.ir import For
from tilegraph.loop.visit import walk_stmts


@pytest.mark.parametrize("factors, extents", [([None, 4], (3, 4)), ([2, None], (2, 5)), ([3, 2, None], (3, 2, 2))])
def test_split_extents_and_meaning(factors, extents):
    wl = matmul(10, 3, 2)
    sch = tg.Schedule(wl)
    outs = sch.split(sch.loops("C")[0], factors)
    loops = {lp.var.name: lp.extent for lp in walk_stmts(sch.func.body) if isinstance(lp, For)}
    assert tuple(loops[o] for o in outs) == extents
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))


def test_a_split_that_does_not_divide_guards_the_tail():
    sch = tg.Schedule(matmul(10, 3, 2))
    sch.split(sch.loops("C")[0], [None, 4])
    assert "< 10" in str(sch)
    exact = tg.Schedule(matmul(12, 3, 2))
    exact.split(exact.loops("C")[0], [None, 4])
    assert "< 12" not in str(exact)


@pytest.mark.parametrize("factors, message", [
    ([None, None], "None"), ([0, None], "factor"), ([None, 2000], "factor"), ([None], "two"),
])
def test_bad_factors_are_refused_and_leave_the_schedule_unchanged(factors, message):
    sch = tg.Schedule(matmul(10, 3, 2))
    before = sch.func
    with pytest.raises(tg.ScheduleError, match=message):
        sch.split(sch.loops("C")[0], factors)
    assert sch.func is before and len(sch.trace) == 0


def test_an_annotated_loop_cannot_be_split():
    sch = tg.Schedule(matmul(8, 3, 2))
    i = sch.loops("C")[0]
    sch.parallel(i)
    with pytest.raises(tg.ScheduleError, match="already parallel"):
        sch.split(i, 2)
