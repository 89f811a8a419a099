import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te, workloads
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.gensor.markov import MarkovConfig
from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
from tilegraph.tune.gensor.to_trace import state_to_schedule, uses_micro_kernel
from tilegraph.tune.hardware import hardware_model
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy

HW = hardware_model(measure=False)


def matmul_workload(m, n, k):
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, name="C")])

QUICK = MarkovConfig(max_walks=24, time_budget_s=30.0)


def _check(wl, sch, rtol=1e-4):
    args = random_inputs(wl, seed=1)
    got = tg.interpret(sch, *args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for g, r in zip(got, reference_outputs(wl, args)):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=rtol)


def _kinds(sch):
    return [inst.kind for inst in sch.trace.instructions]


@pytest.mark.parametrize("wid", workloads.list())
def test_every_proposed_state_of_every_suite_op_interprets_to_the_reference(wid):
    wl = workloads.get(wid, reduced=True)
    cands = GensorStrategy(top_k=2, config=QUICK, hw=HW).propose(TuneContext(wl, "cpu", 0, None), 2)
    assert cands
    for cand in cands:
        state = EtirState.from_dict(cand.meta["state"])
        assert state.accumulators + state.interleave + 1 <= HW.vector_registers
        _check(wl, tg.Schedule.replay(wl, cand.trace_json), rtol=1e-3)


def test_gemm_state_emits_the_packed_register_micro_kernel():
    wl = matmul_workload(64, 64, 32)
    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((4, 32), (4, 32), (16, 32), (32,), 1, 16, unroll=2, parallel=2, pack=("B",)))
    assert uses_micro_kernel(space, state)
    sch = state_to_schedule(wl, space, state)
    kinds = _kinds(sch)
    for kind in ("cache_write", "reverse_compute_at", "cache_read", "compute_at", "parallel", "vectorize", "unroll"):
        assert kind in kinds
    assert "B_global" in sch.block_names() and "C_wb" in sch.block_names()
    _check(wl, sch)


def test_non_dividing_gemm_tiles_are_guarded():
    wl = matmul_workload(37, 45, 19)
    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((5, 32), (5, 32), (10, 32), (19,), 1, 16, parallel=2, pack=("B",)))
    sch = state_to_schedule(wl, space, state)
    assert "reverse_compute_at" in _kinds(sch)
    _check(wl, sch)


def test_conv_bn_relu_epilogue_reads_the_accumulators():
    wl = workloads.get("CBR-2", reduced=True)
    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((1, 2, 2, 8), (1, 2, 2, 8), (1, 4, 4, 8), space.reduce, 3, 8, parallel=1,
                                       pack=("w",)))
    sch = state_to_schedule(wl, space, state)
    names = sch.block_names()
    assert "conv2d_bn_relu_conv_wb" not in names and "conv2d_bn_relu" in names  # write-back inlined
    assert "conv2d_bn_relu_conv_pad" in names  # padding stays a separate copy, out of the micro-kernel
    _check(wl, sch, rtol=1e-3)


def test_transposes_of_batch_matmul_are_inlined():
    wl = workloads.get("TBG-1", reduced=True)
    space = IterSpace.from_workload(wl)
    assert {o.name for o in space.operands} == {"query", "value"}
    sch = state_to_schedule(wl, space, canonical(space, EtirState((1, 1, 2, 16), (1, 1, 2, 16), (1, 1, 4, 16),
                                                                  space.reduce, 3, 16, parallel=2)))
    assert [n for n in sch.block_names() if n.endswith("_t")] == []
    _check(wl, sch)


def test_candidates_record_their_state_as_json():
    wl = workloads.get("C2D-2", reduced=True)
    cand = GensorStrategy(top_k=1, config=QUICK, hw=HW).propose(TuneContext(wl, "cpu", 0, None), 1)[0]
    assert EtirState.from_dict(json.loads(json.dumps(cand.meta["state"]))).vec_axis == 3


@pytest.mark.needs_cc
@pytest.mark.skipif(tg.target.host_arch() != "x86_64", reason="x86 ISAs")
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("wid", ["GMM-1", "C2D-3", "CBR-2", "DEP-1", "SFM-1", "NRM-1", "T2D-1", "TBG-1", "GRP-1"])
def test_best_candidates_compile_and_match(wid, isa):
    """Gensor's best candidate for each ISA's model (16 or 32 registers, 8 or 16 lanes), compiled
    for that ISA; run where this host can run it, compiled only elsewhere."""
    wl = workloads.get(wid, reduced=True)
    target = tg.Target("cpu", isa=isa, num_cores=1)
    hw = hardware_model(target, measure=False)
    cand = GensorStrategy(top_k=1, config=QUICK, hw=hw).propose(TuneContext(wl, target, 0, None), 1)[0]
    state = EtirState.from_dict(cand.meta["state"])
    assert state.accumulators + state.interleave + 1 <= hw.vector_registers
    sch = tg.Schedule.replay(wl, cand.trace_json)
    if not tg.target.host_supports(target):
        from tests.foreign_isa import compile_only

        assert compile_only(sch, target)[1].exists()
        pytest.skip(f"this host cannot run {isa} kernels (compiled only)")
    kernel = tg.build(sch, target=target)
    args = random_inputs(wl, seed=2)
    outs = tuple(np.full(t.shape, np.nan, dtype=np.float32) for t in wl.outputs)
    kernel(*args, out=outs, num_threads=2)
    for got, ref in zip(outs, reference_outputs(wl, args)):
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.needs_cc
def test_non_dividing_micro_kernel_compiles_and_matches():
    wl = matmul_workload(37, 45, 19)
    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((5, 32), (5, 32), (10, 32), (19,), 1, 16, parallel=2, pack=("B",)))
    kernel = tg.build(state_to_schedule(wl, space, state), target="cpu")
    args = random_inputs(wl, seed=3)
    out = np.full((37, 45), np.nan, dtype=np.float32)
    kernel(*args, out=(out,), num_threads=2)
    np.testing.assert_allclose(out, reference_outputs(wl, args)[0], rtol=1e-4, atol=1e-4)


def _odd_reduction_workload(kind):
    if kind == "softmax":
        x = te.placeholder((3, 5, 333), name="x")
        return tg.Workload([x], [ops.softmax(x)])
    if kind == "layer_norm":
        x, g, b = te.placeholder((9, 203), name="x"), te.placeholder((203,), name="g"), te.placeholder((203,), name="b")
        return tg.Workload([x, g, b], [ops.layer_norm(x, g, b)])
    if kind == "norm_bmn":
        x = te.placeholder((1, 37, 301), name="x")
        return tg.Workload([x], [ops.norm_bmn(x)])
    if kind == "norm_bmn_batched":
        x = te.placeholder((70, 3, 29), name="x")
        return tg.Workload([x], [ops.norm_bmn(x)])
    if kind == "vector_sum":
        x = te.placeholder((5003,), name="x")
        return tg.Workload([x], [ops.sum(x, axis=0)])
    x = te.placeholder((6, 77), name="x")
    return tg.Workload([x], [getattr(ops, kind)(x, axis=-1)])


def _gensor_schedules(wl, k=2):
    cands = GensorStrategy(top_k=k, config=QUICK, hw=HW).propose(TuneContext(wl, "cpu", 0, None), k)
    assert cands
    return [tg.Schedule.replay(wl, c.trace_json) for c in cands]


ODD_REDUCTIONS = ["softmax", "layer_norm", "norm_bmn", "norm_bmn_batched", "vector_sum", "sum", "mean", "max", "min"]


@pytest.mark.parametrize("kind", ODD_REDUCTIONS)
def test_contiguous_reductions_are_rfactored_into_vector_partial_results(kind):
    wl = _odd_reduction_workload(kind)
    for sch in _gensor_schedules(wl):
        kinds = _kinds(sch)
        assert "rfactor" in kinds and "vectorize" in kinds
        assert any(b.endswith("_rf") for b in sch.block_names())
        _check(wl, sch, rtol=1e-4)


def test_full_reduction_runs_its_chunks_in_parallel():
    wl = _odd_reduction_workload("norm_bmn")
    sch = _gensor_schedules(wl, 1)[0]
    assert _kinds(sch).count("rfactor") == 2 and "parallel" in _kinds(sch)
    assert "norm_bmn_sumsq_rf_rf" in sch.block_names()


@pytest.mark.needs_cc
@pytest.mark.parametrize("kind", ODD_REDUCTIONS)
def test_rfactored_reductions_compile_and_match(kind):
    wl = _odd_reduction_workload(kind)
    args = random_inputs(wl, seed=4)
    refs = reference_outputs(wl, args)
    for sch in _gensor_schedules(wl):
        kernel = tg.build(sch, target="cpu")
        outs = tuple(np.full(t.shape, np.nan, dtype=np.float32) for t in wl.outputs)
        kernel(*args, out=outs, num_threads=2)
        for got, ref in zip(outs, refs):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("columns", [96, 37])  # 37: full vectors then a guarded tail (was 37 scalar exps)
def test_softmax_runs_every_stage_per_row_with_exp_computed_once_and_vectorized(columns):
    import tilegraph as tg
    from tilegraph import workloads
    from tilegraph.loop.visit import loops_above
    from tilegraph.target import Target
    from tilegraph.tune.strategy.base import TuneContext
    from tilegraph.tune.strategy.gensor import GensorStrategy

    wl = workloads.from_spec(f"softmax:6,{columns}")
    target = Target("cpu", isa="avx2", num_cores=2)
    cand = GensorStrategy(top_k=1, measure_hardware=False).propose(TuneContext(wl, target, seed=0, db=None), 1)[0]
    sch = tg.Schedule.replay(wl, cand.trace_json)
    exp_loops = loops_above(sch.func, "softmax_exp")
    out_loops = loops_above(sch.func, "softmax")
    assert exp_loops[0] is out_loops[0] and exp_loops[0].kind == "parallel", "one parallel loop over rows"
    assert exp_loops[-1].kind == "vectorized"
    x = np.random.default_rng(0).standard_normal((6, columns)).astype("float32")
    want = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(tg.interpret(sch, x), want / want.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.needs_cc
@pytest.mark.parametrize("spec", ["softmax:5,37", "softmax:2,3,19", "layer_norm:7,19"])
def test_row_kernels_with_a_vector_tail_compute_the_reference_in_c(spec):
    """Rows the vector width does not divide: full vectors, then a guarded tail (host target)."""
    from tilegraph.graph.construct import construct_one

    wl = workloads.from_spec(spec)
    sch = tg.Schedule.replay(wl, construct_one(wl, tg.Target("cpu")))
    args = random_inputs(wl, seed=4)
    outs = tuple(np.full(t.shape, np.nan, dtype=np.float32) for t in wl.outputs)
    tg.build(sch, target="cpu")(*args, out=outs, num_threads=2)
    for got, ref in zip(outs, reference_outputs(wl, args)):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec, inlined", [
    ("depthwise_conv2d_nhwc:1,13,11,24,3,2,1", True),   # its input is loaded as vectors along channels
    ("conv2d_nhwc:1,13,11,24,24,3,1,1,1,24", True),     # the same as ONNX writes it (groups = channels,
    # channel index co // 1 + rc with rc of extent 1): MobileNet-V2's 112x112x32 one 0.21 -> 0.06 ms
    ("conv2d_nhwc:1,9,7,8,16,3,1,1", False),            # its input is broadcast: the padded copy stays
])
def test_padding_is_inlined_only_into_vector_loads(spec, inlined):
    """A guard per vector load (uniform over its lanes) costs less than writing and re-reading a
    padded copy of the whole input (DEP-2: 1.36x faster); a guard per broadcast does not."""
    wl = workloads.from_spec(spec)
    space = IterSpace.from_workload(wl)
    hw = hardware_model(tg.Target("cpu", isa="avx2"), measure=False)
    (cand,) = GensorStrategy(top_k=1, hw=hw).propose(TuneContext(wl, tg.Target("cpu", isa="avx2"), seed=0, db=None), 1)
    state = EtirState.from_dict(cand.meta["state"])
    assert uses_micro_kernel(space, state)
    sch = state_to_schedule(wl, space, state)
    pad = next(t.name for t in wl.computes if t.name.endswith("_pad"))
    assert (pad not in sch.block_names()) == inlined
    _check(wl, sch)


@pytest.mark.needs_cc
def test_the_transposed_operand_of_batch_matmul_is_packed_transposed():
    """TBG reads value[b, j, h, d] along j (the vector axis) with a stride of h*d floats: every
    vector was a gather. The packed copy puts j last ([b, h, d, j]), so the micro-kernel loads
    whole vectors (TBG-2 on AVX2 vs torch: 0.65x -> 0.83x at 2 threads)."""
    from tilegraph.tune.gensor.state import pack_order, packable_operands

    wl = workloads.from_spec("transpose_batch_matmul:1,19,3,10")
    space = IterSpace.from_workload(wl)
    value = next(o for o in space.operands if o.name == "value")
    assert pack_order(value, space.vec_axis) == (0, 2, 3, 1) and "value" in packable_operands(space)
    state = canonical(space, EtirState((1, 1, 3, 16), (1, 1, 3, 16), (1, 1, 6, 16), (10,), 3, 8, pack=("value",)))
    sch = state_to_schedule(wl, space, state)
    assert "value_global" in sch.block_names()
    _check(wl, sch)
    kernel = tg.build(sch, tg.Target("cpu", isa="avx2"))
    if tg.target.host_supports(kernel.target):
        args = random_inputs(wl, seed=3)
        np.testing.assert_allclose(kernel(*args), reference_outputs(wl, args)[0], rtol=1e-4, atol=1e-4)


def _pack_layout(sch, buffer):
    (inst,) = [i for i in sch.trace.instructions if i.kind == "cache_read" and i.inputs["buffer"] == buffer]
    return inst.inputs.get("layout")


@pytest.mark.skipif(tg.target.host_arch() != "x86_64", reason="x86 ISAs")
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_packed_b_is_one_contiguous_micro_panel_per_register_tile(isa):
    """B[K, N] is copied as [N // nr, K, nr]: a reduction step of a register tile nr wide reads
    the nr floats right after the previous step's (BERT's FFN GEMM on Zen 3: 1.20x, one thread and
    two). The product is unchanged, in the interpreter and in C with poisoned outputs, at odd K."""
    target = tg.Target("cpu", isa=isa)
    lanes = target.lanes("float32")
    m, n, k = 10, 6 * lanes, 13
    wl = matmul_workload(m, n, k)
    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((2, 3 * lanes), (2, 3 * lanes), (10, 6 * lanes), (k,), 1, lanes,
                                       parallel=2, pack=("B",)))
    sch = state_to_schedule(wl, space, state)
    assert _pack_layout(sch, "B") == {"split": [[1, 3 * lanes]], "order": [1, 0, 2]}
    _check(wl, sch)
    if not tg.target.host_supports(target):
        from tests.foreign_isa import compile_only

        assert compile_only(sch, target)[1].exists()
        pytest.skip(f"this host cannot run {isa} kernels (compiled only)")
    kernel = tg.build(sch, target)
    args = random_inputs(wl, seed=5)
    out = np.full((m, n), np.nan, dtype=np.float32)
    kernel(*args, out=out, num_threads=2)
    np.testing.assert_allclose(out, args[0].astype(np.float64) @ args[1], rtol=1e-5, atol=1e-5)


def test_micro_panels_keep_the_batch_dimension_outermost():
    """A batched B[b, K, N] becomes [b, N // nr, K, nr]: the dimensions only spatial axes index
    stay outside the panels, the reduction's inside."""
    from tilegraph.tune.gensor.to_trace import micro_panel_layout

    wl = workloads.from_spec("batch_matmul:3,8,32,5")
    space = IterSpace.from_workload(wl)
    b = next(o for o in space.operands if len(o.shape) == 3 and o.contiguous_axis() == space.vec_axis)
    state = canonical(space, EtirState((1, 2, 16), (1, 2, 16), (1, 8, 32), (5,), space.vec_axis, 8, pack=(b.name,)))
    assert micro_panel_layout(space, state, b) == {"split": [[2, 16]], "order": [0, 2, 1, 3]}
    _check(wl, state_to_schedule(wl, space, state))


def test_no_micro_panels_where_the_tile_does_not_divide_or_spans_the_columns():
    from tilegraph.tune.gensor.to_trace import micro_panel_layout

    wl = matmul_workload(8, 40, 7)
    space = IterSpace.from_workload(wl)
    b = next(o for o in space.operands if o.name == "B")
    for reg in (16, 40):  # 16 does not divide 40; 40 is every column
        state = canonical(space, EtirState((2, reg), (2, reg), (8, 40), (7,), 1, 8, pack=("B",)))
        assert micro_panel_layout(space, state, b) is None, reg
