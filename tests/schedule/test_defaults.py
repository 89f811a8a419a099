"""schedule/defaults.py: the default schedules and the one inline policy the tuners share."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.schedule.defaults import default_gpu_schedule, default_schedule, gpu_anchor, inline_producers


def _padded_conv():
    x = te.placeholder((1, 6, 6, 3), name="x")
    w = te.placeholder((3, 3, 3, 4), name="w")
    return tg.Workload([x, w], [ops.conv2d_nhwc(x, w, stride=1, padding=1)])


def _exp_into_reduction():
    a = te.placeholder((4, 5), name="A")
    e = te.compute((4, 5), lambda i, j: te.exp(a[i, j]), name="E")
    k = te.reduce_axis(5, "k")
    return tg.Workload([a], [te.compute((4,), lambda i: te.sum(e[i, k], axis=k), name="S")])


def _stages(sch):
    return set(sch.block_names())


def test_cheap_policy_inlines_padding_but_not_math_into_a_reduction():
    conv = tg.Schedule(_padded_conv())
    inline_producers(conv, "cheap")
    assert len(_stages(conv)) == 1, "the padding stage is recomputed in the conv"
    red = tg.Schedule(_exp_into_reduction())
    inline_producers(red, "cheap")
    assert _stages(red) == {"E", "S"}, "exp is not recomputed per reduction step"


def test_all_policy_inlines_everything_but_what_it_is_told_to_keep():
    red = tg.Schedule(_exp_into_reduction())
    inline_producers(red, "all")
    assert _stages(red) == {"S"}
    conv = tg.Schedule(_padded_conv())
    inline_producers(conv, "all", keep_padding=True)
    assert len(_stages(conv)) == 2
    with pytest.raises(ValueError, match="policy"):
        inline_producers(conv, "some")


@pytest.mark.parametrize("make", [_padded_conv, _exp_into_reduction])
def test_default_schedules_keep_the_meaning(make, rng):
    wl = make()
    inputs = [rng.standard_normal(t.shape).astype("float32") for t in wl.inputs]
    want = tg.interpret(wl, *inputs)
    got = tg.interpret(default_schedule(wl, "cpu -isa=avx2"), *inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    gpu = default_gpu_schedule(wl)
    assert gpu_anchor(gpu) in gpu.block_names()
    np.testing.assert_allclose(tg.interpret(gpu, *inputs, thread_order="random", seed=3), want, rtol=1e-5, atol=1e-5)


def test_the_tuner_keeps_a_math_stage_a_reduction_and_a_later_stage_both_read():
    wl = tg.Workload(*(lambda x: ([x], [ops.softmax(x)]))(te.placeholder((4, 9), name="x")))
    kept = tg.Schedule(wl)
    inline_producers(kept, "all", keep={"softmax_expsum"}, keep_costly=True)
    assert "softmax_exp" in kept.block_names(), "exp computed once, read by the sum and the division"
    gpu_like = tg.Schedule(wl)
    inline_producers(gpu_like, "all", keep={"softmax_expsum"})
    assert "softmax_exp" not in gpu_like.block_names()


@pytest.mark.needs_cc
@pytest.mark.parametrize("out_dtype", ["uint8", "int8"])
def test_a_quantizing_chain_is_vectorised_and_matches_numpy(out_dtype, rng):
    """x -> round(x / s) + z -> clip -> cast to 8 bits (a QuantizeLinear after a GELU in QDQ BERT):
    the default schedule stores whole vectors of bytes (it ran per element, 1.8 ms for 128 x 3072)
    and computes what numpy does, odd row lengths included."""
    lo, hi = (0.0, 255.0) if out_dtype == "uint8" else (-128.0, 127.0)
    for shape in ((3, 70), (2, 1)):
        x = te.placeholder(shape, name="x")
        q = te.compute(shape, lambda i, j, x=x: te.cast(out_dtype, te.min_(te.max_(
            te.round_(x[i, j] / te.const(0.05, "float32")) + te.const(3.0, "float32"),
            te.const(lo, "float32")), te.const(hi, "float32"))), name="Q")
        wl = tg.Workload([x], [q])
        sch = default_schedule(wl, "cpu")
        if shape[1] >= 16:
            assert "vectorize" in sch.trace.to_json()
        data = (rng.standard_normal(shape) * 8).astype("float32")
        want = np.clip(np.round(data / np.float32(0.05)) + 3, lo, hi).astype(out_dtype)
        np.testing.assert_array_equal(tg.interpret(sch, data), want)
        got = tg.build(sch, "cpu")(data)
        np.testing.assert_array_equal(got, want)
