import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import (
    assert_same_as_unscheduled,
    conv_reference,
    conv_with_pad,
    inputs_for,
    matmul,
    softmax,
    softmax_reference,
)


def test_compute_at_pad_under_conv_row_covers_halo():
    wl = conv_with_pad(2, 7, 5, 3)
    sch = tg.Schedule(wl)
    ff, oh, *_ = sch.loops("conv")
    sch.compute_at("pad", oh)
    text = str(sch)
    # one output row needs 3 padded rows, all channels and all padded columns
    assert "for ph_1 in range(3)" in text and "v_ph=(oh + ph_1)" in text
    x, w = inputs_for(wl)
    assert_same_as_unscheduled(sch, [x, w], conv_reference(x.astype(np.float64), w.astype(np.float64)))


def test_compute_at_split_loop_adds_predicate_for_tail():
    wl = conv_with_pad(2, 7, 5, 3)
    sch = tg.Schedule(wl)
    ff, oh, ow, *_ = sch.loops("conv")
    oh0, oh1 = sch.split(oh, 3)
    sch.compute_at("pad", oh0)
    text = str(sch)
    assert "for ph_1 in range(5)" in text and "< 9" in text  # the last tile would read past the buffer
    assert_same_as_unscheduled(sch, inputs_for(wl))


def test_compute_at_reduction_producer_moves_whole():
    wl = softmax(5, 7)
    sch = tg.Schedule(wl)
    i_out = sch.loops("out")[0]
    sch.compute_at("s", i_out)
    sch.compute_at("e", i_out)
    sch.compute_at("mx", i_out)
    text = str(sch)
    assert text.count("\n  for ") == 1  # one root nest holds every stage
    (x,) = inputs_for(wl)
    assert_same_as_unscheduled(sch, [x], softmax_reference(x.astype(np.float64)))
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


def test_compute_at_cache_read_tile_of_matmul():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    io, ii = sch.split(i, 4)
    sch.reorder(io, j, k, ii)
    blk = sch.cache_read("C", "A", "local")
    sch.compute_at(blk, k)
    assert "for ax0_1 in range(4)" in str(sch)
    assert_same_as_unscheduled(sch, inputs_for(wl))


def test_compute_at_refusals_leave_schedule_unchanged():
    sch = tg.Schedule(softmax(5, 7))
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="does not enclose a consumer"):
        sch.compute_at("e", sch.loops("mx")[0])
    with pytest.raises(tg.ScheduleError, match="also read"):
        sch.compute_at("e", sch.loops("s")[0])  # out reads e too, outside s's loops
    with pytest.raises(tg.ScheduleError, match="output"):
        sch.compute_at("out", sch.loops("e")[0])
    with pytest.raises(tg.ScheduleError, match="no loop named"):
        sch.compute_at("e", "nope")
    assert sch.func == before and not sch.trace.instructions
