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
)


def test_compute_inline_pad_into_conv():
    wl = conv_with_pad(2, 6, 5, 3)
    sch = tg.Schedule(wl)
    sch.compute_inline("pad")
    text = str(sch)
    assert "block pad" not in text and "alloc pad" not in text and "X[v_rc, ((v_oh + v_rh) + -1)" in text
    x, w = inputs_for(wl)
    assert_same_as_unscheduled(sch, [x, w], conv_reference(x.astype(np.float64), w.astype(np.float64)))


def test_compute_inline_elementwise_into_two_readers():
    wl = softmax(4, 6)
    sch = tg.Schedule(wl)
    sch.compute_inline("e")
    assert "alloc e" not in str(sch)
    assert_same_as_unscheduled(sch, inputs_for(wl))


@pytest.mark.parametrize(("wl", "block", "match"), [
    (matmul(4, 3, 2), "C", "reduction"),
    (softmax(4, 6), "out", "output"),
    (softmax(4, 6), "mx", "reduction"),
])
def test_compute_inline_refusals(wl, block, match):
    sch = tg.Schedule(wl)
    before = sch.func
    with pytest.raises(tg.ScheduleError, match=match):
        sch.compute_inline(block)
    assert sch.func == before
