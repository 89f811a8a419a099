import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul


def test_decompose_reduction_before_reduce_loop():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    sch.reorder(i, k, j)
    init = sch.decompose_reduction("C", k)
    assert init == "C_init"
    text = str(sch)
    assert "for j_init in range(11)" in text and "init:" not in text
    assert text.index("block C_init") < text.index("for k in range(7)")
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


def test_decompose_reduction_drops_reduce_guards_keeps_spatial_guards():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    io, ii = sch.split(i, 4)
    ko, ki = sch.split(k, 3)
    sch.reorder(io, ko, ii, j, ki)
    sch.decompose_reduction("C", ko)
    text = str(sch)
    init_line = next(line for line in text.splitlines() if "block C_init" in line)
    assert "< 13" in init_line and "< 7" not in init_line
    assert_same_as_unscheduled(sch, inputs_for(wl))


def test_decompose_reduction_refusals():
    sch = tg.Schedule(matmul(5, 4, 3))
    i, j, k = sch.loops("C")
    ko, ki = sch.split(k, 1)
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="drives a reduce variable"):
        sch.decompose_reduction("C", ki)  # ko, above ki, is a reduction loop
    assert sch.func == before
    copy = sch.cache_read("C", "A")
    with pytest.raises(tg.ScheduleError, match="does not enclose"):
        sch.decompose_reduction("C", sch.loops(copy)[0])
    sch.decompose_reduction("C", i)
    with pytest.raises(tg.ScheduleError, match="no init"):
        sch.decompose_reduction("C", i)
