import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul, matmul_relu, softmax


def test_reverse_compute_at_write_back_under_tile():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    io, ii = sch.split(i, 4)
    jo, ji = sch.split(j, 4)
    sch.reorder(io, jo, k, ii, ji)
    wb = sch.cache_write("C", "local")
    sch.reverse_compute_at(wb, jo)
    text = str(sch)
    assert "block C_wb(v0=((i_0 * 4) + ax0_1), v1=((j_0 * 4) + ax1_1))" in text
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))


def test_reverse_compute_at_elementwise_epilogue():
    wl = matmul_relu(9, 6, 5)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    sch.reverse_compute_at("D", i)
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0))


def test_reverse_compute_at_refuses_partial_reduction():
    sch = tg.Schedule(matmul_relu(9, 6, 5))
    i, j, k = sch.loops("C")
    sch.reorder(k, i, j)
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="partial results"):
        sch.reverse_compute_at("D", i)
    assert sch.func == before


def test_reverse_compute_at_needs_a_producer_under_loop():
    sch = tg.Schedule(softmax(4, 6))
    with pytest.raises(tg.ScheduleError, match="no block under loop"):
        sch.reverse_compute_at("out", sch.loops("mx")[0])
    with pytest.raises(tg.ScheduleError, match="is a reduction"):
        sch.reverse_compute_at("s", sch.loops("e")[0])
