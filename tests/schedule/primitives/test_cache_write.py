import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul, matmul_relu, softmax


def test_cache_write_adds_write_back_after_the_nest():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    wb = sch.cache_write("C", "local")
    assert wb == "C_wb"
    text = str(sch)
    assert "C_local[v_i, v_j] = 0.0f" in text and "C[v_i, v_j]" not in text
    assert "C[v0, v1] = C_local[v0, v1]" in text
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


def test_cache_write_of_intermediate_keeps_readers_on_original():
    wl = softmax(4, 6)
    sch = tg.Schedule(wl)
    sch.cache_write("e", "local")
    assert_same_as_unscheduled(sch, inputs_for(wl))


def test_cache_write_refuses_when_another_block_writes_the_output():
    sch = tg.Schedule(matmul(5, 4, 3))
    sch.decompose_reduction("C", sch.loops("C")[0])
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="also written by"):
        sch.cache_write("C")
    assert sch.func == before


def test_cache_write_refuses_reader_in_same_nest():
    sch = tg.Schedule(matmul_relu(5, 4, 3))
    sch.reverse_compute_at("D", sch.loops("C")[0])
    with pytest.raises(tg.ScheduleError, match="same loop nest"):
        sch.cache_write("C")
