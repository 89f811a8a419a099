"""Sketches: every op family's sketch programs mean what the workload means, in the interpreter and
compiled, and replay exactly from their traces."""

import random

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.errors import ScheduleError
from tilegraph.schedule.trace import Trace
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.space.decider import Decider
from tilegraph.tune.space.sketch import apply_sketch, sketches_for

FAMILIES = sorted({wid.split("-")[0] for wid in workloads.list()})


def _check(wl, got, rtol=1e-3):
    args = random_inputs(wl, seed=3)
    got = got(*args) if callable(got) else tg.interpret(got, *args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for g, r in zip(got, reference_outputs(wl, args)):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("family", FAMILIES)
def test_sketch_programs_of_every_op_family_interpret_to_the_reference_and_replay(family):
    wl = workloads.get(f"{family}-1", reduced=True)
    for sketch in sketches_for(wl):
        for seed in range(2):
            sch = apply_sketch(wl, sketch, Decider(random.Random(seed)))
            _check(wl, sch)
            assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


@pytest.mark.needs_cc
@pytest.mark.parametrize("wid", ["GMM-1", "C2D-2", "DEP-1", "SFM-1", "CBR-1", "NRM-1"])
def test_sketch_programs_compile_to_correct_kernels(wid, tune_dirs):
    wl = workloads.get(wid, reduced=True)
    for seed in range(2):
        sch = apply_sketch(wl, sketches_for(wl)[0], Decider(random.Random(seed)))
        _check(wl, tg.build(sch))


def test_reuse_anchors_get_multi_level_tiling_and_the_rest_plain():
    assert sketches_for(workloads.get("GMM-1", reduced=True)) == ["multi_level_tiling"]
    assert sketches_for(workloads.get("C2D-1", reduced=True)) == ["multi_level_tiling"]
    assert sketches_for(workloads.get("SFM-1", reduced=True)) == ["plain"]


def test_multi_level_tiling_is_ssrsrs_with_sampled_factors():
    wl = workloads.from_spec("matmul:32,48,64")
    sch = apply_sketch(wl, "multi_level_tiling", Decider(random.Random(0)))
    tiles = [i for i in sch.trace.instructions if i.kind == "sample_tile"]
    assert [len(i.decision) for i in tiles] == [4, 4, 2]  # i, j: 4 spatial levels; k: 2 reduce levels
    assert [int(np.prod(i.decision)) for i in tiles] == [32, 64, 48]  # matmul:M,K,N: i=32, j=64, k=48
    assert all(i.decision[-1] <= 64 for i in tiles)
    kinds = [i.kind for i in sch.trace.instructions]
    assert "reorder" in kinds and "sample_categorical" in kinds


def test_given_decisions_are_used_and_ill_fitting_ones_replaced():
    wl = workloads.from_spec("matmul:32,48,64")
    first = Decider(random.Random(0))
    sch = apply_sketch(wl, "multi_level_tiling", first)
    again = Decider(random.Random(99), given=first.taken)
    assert apply_sketch(wl, "multi_level_tiling", again).trace.to_json() == sch.trace.to_json()
    bad = list(first.taken)
    bad[0] = [5, 5, 5, 5]  # not factors of 32: a fresh decision replaces it
    decider = Decider(random.Random(1), given=bad)
    sch2 = apply_sketch(wl, "multi_level_tiling", decider)
    assert int(np.prod(decider.taken[0])) == 32  # i
    _check(wl, sch2)
    Trace.from_json(sch2.trace.to_json())


def test_an_unknown_sketch_is_refused():
    with pytest.raises(ScheduleError, match="unknown sketch"):
        apply_sketch(workloads.from_spec("matmul:4,4,4"), "nope", Decider(random.Random(0)))


@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_int8_operands_may_be_packed_in_a_dot_steps_k_groups(op):
    """multi_level_tiling samples, for an 8-bit reused operand, a packed copy whose reduction
    dimension is stored in groups of 2 or 4 (what a dot-product step reads); such programs still
    mean the workload, bit for bit (int32 accumulation)."""
    from tilegraph import ops, te

    if op == "matmul":
        a = te.placeholder((9, 32), "uint8", name="A")
        b = te.placeholder((32, 48), "int8", name="B")
        wl = tg.Workload([a, b], [ops.matmul(a, b, accumulate="int32")])
    else:
        a = te.placeholder((1, 5, 6, 16), "uint8", name="A")
        b = te.placeholder((3, 3, 16, 32), "int8", name="B")
        wl = tg.Workload([a, b], [ops.conv2d_nhwc(a, b, padding=1, accumulate="int32")])
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, a.shape).astype(np.uint8)
    w = rng.integers(-128, 128, b.shape).astype(np.int8)
    want = tg.interpret(tg.Schedule(wl), x, w)
    groups = set()
    for seed in range(40):
        sch = apply_sketch(wl, "multi_level_tiling", Decider(random.Random(seed)))
        for ins in sch.trace.instructions:
            if ins.kind == "cache_read" and ins.inputs.get("layout"):
                groups.add(ins.inputs["layout"]["split"][0][1])
                np.testing.assert_array_equal(tg.interpret(sch, x, w), want)
                assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func
    assert groups == {2, 4}
