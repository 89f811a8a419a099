"""Winograd's transforms (ops/winograd.py) against float64 numpy: the matrices compose to a 3x3
convolution exactly; each transform on the interpreter and in C under its schedule (every point
unrolled), at odd sizes with uneven padding, outputs poisoned first."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.loop.printer import func_str
from tilegraph.lower.pipeline import lower
from tilegraph.ops import winograd
from tilegraph.schedule.defaults import default_schedule
from tilegraph.schedule.winograd import winograd_schedule, winograd_tag
from tilegraph.testing import reference as ref
from tilegraph.testing.reference import reference_outputs

CASES = [  # n, h, w, c, k, pads (top, left, bottom, right)
    (1, 7, 9, 3, 5, (1, 1, 1, 1)),
    (2, 5, 6, 17, 4, (0, 0, 0, 0)),
    (1, 3, 4, 1, 1, (1, 0, 2, 1)),
    (1, 1, 1, 2, 2, (1, 1, 1, 1)),
    (1, 8, 8, 16, 32, (1, 1, 1, 1)),
]


def _out_hw(h, w, pads):
    return h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2


@pytest.mark.parametrize("m", winograd.TILE_SIZES)
@pytest.mark.parametrize("n,h,w,c,k,pads", CASES)
def test_the_transforms_compose_to_the_convolution(m, n, h, w, c, k, pads):
    rng = np.random.default_rng(h * w + c)
    x, g = rng.standard_normal((n, h, w, c)), rng.standard_normal((3, 3, c, k))
    direct = ref.conv2d_nhwc(x, g, 1, pads[:2], 1, 1, pads[2:])
    out_hw = _out_hw(h, w, pads)
    v = ref.winograd_input_nhwc(x, m, pads, out_hw)
    mm = np.einsum("abtc,abck->abtk", v, winograd.transform_weights(g, m))
    np.testing.assert_allclose(ref.winograd_output_nhwc(mm, m, n, out_hw), direct, rtol=1e-10, atol=1e-10)


def _input_workload(n, h, w, c, m, pads):
    x = te.placeholder((n, h, w, c), "float32", name="x")
    return tg.Workload([x], [ops.winograd_input_nhwc(x, m, pads, _out_hw(h, w, pads))])


def _output_workload(n, h, w, k, m, pads):
    out_hw = _out_hw(h, w, pads)
    th, tw = winograd.tiles(out_hw, m)
    mm = te.placeholder((m + 2, m + 2, n * th * tw, k), "float32", name="mm")
    return tg.Workload([mm], [ops.winograd_output_nhwc(mm, m, n, out_hw)])


def _check(wl, arg, tolerance):
    want = reference_outputs(wl, [arg])[0]  # float64, through the ops' registered references
    for target in (tg.Target("cpu", isa="avx2"), tg.Target("cpu", isa="avx512")):
        sch = winograd_schedule(wl, target)
        assert sch is not None
        replayed = tg.Schedule.replay(wl, sch.trace.to_json())  # the schedule is data: it replays
        np.testing.assert_allclose(tg.interpret(replayed, arg), want, rtol=tolerance, atol=tolerance)
    host = tg.Target("cpu")
    out = np.full(wl.outputs[0].shape, 7.0e30, np.float32)  # poisoned: every element must be written
    tg.build(default_schedule(wl, host), host)(arg, out=out)
    np.testing.assert_allclose(out, want, rtol=tolerance, atol=tolerance)


@pytest.mark.needs_cc
@pytest.mark.parametrize("m", winograd.TILE_SIZES)
@pytest.mark.parametrize("n,h,w,c,k,pads", CASES)
def test_the_input_transform_matches_float64(m, n, h, w, c, k, pads):
    wl = _input_workload(n, h, w, c, m, pads)
    assert winograd_tag(wl) == "winograd_input_nhwc"
    x = np.random.default_rng(c).standard_normal((n, h, w, c)).astype(np.float32)
    _check(wl, x, 5e-5 if m == 4 else 1e-6)


@pytest.mark.needs_cc
@pytest.mark.parametrize("m", winograd.TILE_SIZES)
@pytest.mark.parametrize("n,h,w,c,k,pads", CASES)
def test_the_output_transform_matches_float64(m, n, h, w, c, k, pads):
    wl = _output_workload(n, h, w, k, m, pads)
    assert winograd_tag(wl) == "winograd_output_nhwc"
    mm = np.random.default_rng(k).standard_normal(wl.inputs[0].shape).astype(np.float32)
    _check(wl, mm, 2e-4 if m == 4 else 1e-6)


def test_the_schedule_unrolls_every_point():
    """Left as loops, every point's select computes all the cases' terms (the C for F(4x4) ran
    past gcc's timeout); unrolled, the selects fold and each value is its own few terms."""
    wl = _input_workload(1, 8, 8, 16, 4, (1, 1, 1, 1))
    kinds = [i["kind"] for i in winograd_schedule(wl, tg.Target("cpu", isa="avx512")).trace.to_dict()["instructions"]]
    assert kinds.count("unroll") == 2 and "vectorize" in kinds and "parallel" in kinds
    target = tg.Target("cpu", isa="avx512")
    printed = func_str(lower(default_schedule(wl, target).func, target))
    assert printed.count("select(") <= 2  # the zero-bordered copy's guard; 36 x 36 cases left as loops


def test_bad_arguments_say_what_is_wrong():
    x = te.placeholder((1, 6, 6, 4), "float32", name="x")
    with pytest.raises(ValueError, match="m must be one of"):
        ops.winograd_input_nhwc(x, 3)
    with pytest.raises(ValueError, match="does not fit"):
        ops.winograd_input_nhwc(te.placeholder((1, 1, 1, 4), "float32", name="x"), 4, (0, 0, 0, 0))
    with pytest.raises(ValueError, match="mm must have shape"):
        ops.winograd_output_nhwc(te.placeholder((6, 6, 3, 4), "float32", name="mm"), 4, 1, (8, 8))
    with pytest.raises(ValueError, match="HWIO weights of a 3x3"):
        winograd.transform_weights(np.zeros((5, 5, 2, 2)), 4)
