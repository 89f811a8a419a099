"""Fused kernels against the unfused graph and float64 references, on fresh random inputs with odd
sizes, every arena byte poisoned first; the anchor's default and tuned schedules both."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.compile import compile_model
from tilegraph.graph.fusion.compose import fused_spec
from tilegraph.graph.fusion.partition import partition
from tilegraph.tune.database import open_database

pytestmark = pytest.mark.needs_cc
RNG = np.random.default_rng(11)


def _const(b, *shape, scale=1.0):
    return b.constant((RNG.standard_normal(shape) * scale).astype(np.float32))


def _check(graph, expect_launches=None, db=None, **inputs):
    """The fused model equals the reference (float64) and the unfused model; returns it. Greedy
    orchestration: these tests count the kernels fusion makes, which BLP would choose among by
    this machine's timings."""
    expected = run_reference(graph, inputs)
    models = {fuse: compile_model(graph, fuse=fuse, db=db, optimize_graph=False, orchestration="greedy")
              for fuse in (True, False)}
    for fuse, model in models.items():
        model._base[:] = 0xFF  # NaN everywhere: every output element must be written
        got = model.run(inputs)
        for name in graph.outputs:
            np.testing.assert_allclose(got[name], expected[name], rtol=2e-5, atol=2e-5, err_msg=f"fuse={fuse}")
        assert not model.fallbacks, model.fallbacks
    if expect_launches is not None:
        assert len(models[True].steps) == expect_launches
    assert len(models[True].steps) < len(models[False].steps)
    return models[True]


def test_conv_bias_residual_relu_nhwc():
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 7, 5, 3), "float32"))
    c = b.add("conv2d", [x, _const(b, 3, 3, 3, 5), _const(b, 5)], {"pads": (1, 1, 1, 1), "layout": "NHWC"})
    skip = b.input("skip", TensorType((1, 7, 5, 5), "float32"))
    y = b.add("relu", [b.add("add", [c, skip])])
    model = _check(b.build([y]), 1, x=RNG.standard_normal((1, 7, 5, 3)).astype(np.float32),
                   skip=RNG.standard_normal((1, 7, 5, 5)).astype(np.float32))
    (info,) = model.kernels
    assert len(info.nodes) == 3


def test_matmul_bias_gelu_and_broadcast_scale():
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 9, 13), "float32"))
    h = b.add("add", [b.add("matmul", [x, _const(b, 13, 11)]), _const(b, 11)])
    g = b.add("gelu", [h])
    y = b.add("mul", [g, b.constant(np.array([2.5], np.float32))])
    _check(b.build([y]), 1, x=RNG.standard_normal((1, 9, 13)).astype(np.float32))


def test_layout_epilogue_reshape_transpose_scale():
    b = GraphBuilder()
    x = b.input("x", TensorType((7, 12), "float32"))
    h = b.add("add", [b.add("matmul", [x, _const(b, 12, 12)]), _const(b, 12)])
    v = b.add("reshape", [h], {"shape": (7, 3, 4)})
    t = b.add("transpose", [v], {"perm": (1, 0, 2)})
    s = b.add("mul", [t, b.constant(np.array(0.5, np.float32))])
    y = b.add("matmul", [s, _const(b, 4, 5)])
    _check(b.build([y]), 2, x=RNG.standard_normal((7, 12)).astype(np.float32))


def test_transposed_operand_prologue_and_leading_one_broadcast():
    b = GraphBuilder()
    q = b.input("q", TensorType((2, 5, 3), "float32"))
    k = b.input("k", TensorType((2, 5, 3), "float32"))
    kt = b.add("transpose", [k], {"perm": (0, 2, 1)})
    scores = b.add("matmul", [q, kt])                        # (2, 5, 5), K^T read in place
    mask = b.input("mask", TensorType((5, 5), "float32"))
    masked = b.add("add", [scores, mask])
    y = b.add("softmax", [masked], {"axis": -1})
    p = b.add("where", [b.add("isnan", [y]), b.constant(np.array(0.0, np.float32)), y])
    _check(b.build([p]), 2, q=RNG.standard_normal((2, 5, 3)).astype(np.float32),
           k=RNG.standard_normal((2, 5, 3)).astype(np.float32), mask=RNG.standard_normal((5, 5)).astype(np.float32))


def test_layer_norm_with_gather_and_residual_prologue():
    b = GraphBuilder()
    ids = b.input("ids", TensorType((1, 6), "int64"))
    emb = b.add("gather", [_const(b, 17, 9), ids], {"axis": 0})
    pos = b.input("pos", TensorType((1, 6, 9), "float32"))
    s = b.add("add", [emb, pos])
    y = b.add("layer_norm", [s, _const(b, 9), _const(b, 9)], {"axis": -1, "epsilon": 1e-5})
    _check(b.build([y]), 1, ids=RNG.integers(0, 17, (1, 6)).astype(np.int64),
           pos=RNG.standard_normal((1, 6, 9)).astype(np.float32))


def test_pool_epilogue_through_write_once_and_an_elementwise_chain():
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 7, 7, 3), "float32"))
    e = b.add("exp", [b.add("neg", [x])])
    p = b.add("max_pool2d", [x], {"kernel": (3, 3), "strides": (2, 2), "layout": "NHWC"})
    y = b.add("relu", [b.add("sub", [p, b.constant(np.array(0.25, np.float32))])])
    _check(b.build([y, e]), 2, x=RNG.standard_normal((1, 7, 7, 3)).astype(np.float32))


def test_a_tuned_anchor_trace_serves_the_fused_kernel(tmp_path):
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 10, 24), "float32"))
    mm = b.add("matmul", [x, _const(b, 24, 40)], name="mm")
    y = b.add("relu", [b.add("add", [mm, _const(b, 40)])])
    graph = b.build([y])
    (group,) = [g for g in partition(graph) if g.anchor == "mm"]
    spec = fused_spec(graph, group)
    db = open_database(tmp_path / "db.sqlite")
    result = tg.tune(spec.anchor.workload, strategy="gensor", trials=4, db=db, progress=False)
    assert result is not None
    model = _check(graph, 1, db=db, x=RNG.standard_normal((1, 10, 24)).astype(np.float32))
    assert model.kernels[0].tuned and "mm" in model.kernels[0].nodes
    unfused = compile_model(graph, fuse=False, db=db, optimize_graph=False, orchestration="greedy")  # same record
    assert [k.tuned for k in unfused.kernels if "mm" in k.nodes] == [True]
    assert spec.key != spec.anchor.key  # the fused kernel has its own key; the anchor's finds the record


def test_a_prologue_only_group_keeps_an_accumulating_schedule():
    b = GraphBuilder()
    x = b.input("x", TensorType((8, 3), "float32"))
    xt = b.add("transpose", [x], {"perm": (1, 0)})
    y = b.add("matmul", [xt, _const(b, 8, 5)])  # the default schedule accumulates in y; no epilogue
    out = b.add("matmul", [y, _const(b, 5, 2)])
    _check(b.build([out, y]), 2, x=RNG.standard_normal((8, 3)).astype(np.float32))


def test_the_fastest_record_that_fuses_serves_a_gpu_group(opencl_device):
    """A GPU thread tile of strided virtual-thread chunks has no dense region to write back once, so
    no epilogue can follow it: the group is built from the next record that fuses (one kernel),
    not split into the anchor's kernel and separate epilogue kernels; no record fusing: the default."""
    from tilegraph.tune.gensor.gpu_state import GpuState, gpu_schedule

    b = GraphBuilder()
    x = b.input("x", TensorType((1, 16, 24), "float32"))
    mm = b.add("matmul", [x, _const(b, 24, 32)], name="mm")
    y = b.add("gelu", [b.add("add", [mm, _const(b, 32)])])
    graph = b.build([y])
    (group,) = [g for g in partition(graph) if g.anchor == "mm"]
    spec = fused_spec(graph, group)
    target = tg.Target("opencl")
    wl = spec.anchor.workload
    strided = gpu_schedule(wl, GpuState((1, 8, 16), (1, 4, 4), (1, 2, 2), (8,)))
    dense = gpu_schedule(wl, GpuState((1, 8, 16), (1, 2, 2), (1, 1, 1), (8,)))
    with pytest.raises(tg.TilegraphError, match="dense box"):
        spec._fuse(strided.copy())
    inputs = {"x": RNG.standard_normal((1, 16, 24)).astype(np.float32)}
    expected = run_reference(graph, inputs)[graph.outputs[0]]
    for schedules, tuned in (([strided, dense], True), ([strided], False)):
        kernel, was_tuned = spec.build(target, schedules)
        assert was_tuned is tuned and len(kernel.entries) == 1  # one fused device kernel
        args = [inputs["x"] if name == "x" else graph.constants[name] for name in spec.arguments]
        np.testing.assert_allclose(kernel(*args), expected, rtol=2e-5, atol=2e-5)


def test_a_matrix_units_operand_with_a_prologue_is_copied_per_task():
    """A bfloat16 product whose A is a transpose and a cast (attention's Q): where the anchor's schedule puts its
    register tile on the matrix unit (AMX), the fused kernel copies A per task with the prologue
    computed into the copy, and lowering still makes one tile product (inlined into the tile's
    loads, it would leave no nest a tile product reads). Lowering only: any machine runs it."""
    import dataclasses

    from tilegraph.graph.construct import construct_one
    from tilegraph.loop.ir import TileProduct
    from tilegraph.loop.visit import walk_stmts
    from tilegraph.lower.pipeline import lower
    from tilegraph.schedule.schedule import Schedule
    from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS

    amx = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
        COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:], "-mavx512bf16",
        "-mavx512vnni", "-mamx-tile", "-mamx-bf16", "-mamx-int8"))
    b = GraphBuilder()
    q = b.input("q", TensorType((128, 4, 64), "float32"))
    qt = b.add("cast", [b.add("transpose", [q], {"perm": (1, 0, 2)})], {"to": "bfloat16"})
    w = b.add("cast", [_const(b, 64, 128)], {"to": "bfloat16"})
    y = b.add("matmul", [qt, w], {"accumulate": "float32"}, name="mm")
    graph = b.build([y])
    (group,) = [g for g in partition(graph) if g.anchor == "mm"]
    spec = fused_spec(graph, group)
    trace = construct_one(spec.anchor.workload, amx)
    assert '"matrix"' not in trace  # (a trace holds primitives only)
    sch = Schedule.replay(spec.anchor.workload, trace)
    fused = spec._fuse(sch.copy(), amx)
    tiles = [s for s in walk_stmts(lower(fused, amx).body) if isinstance(s, TileProduct)]
    assert len(tiles) == 1
    unfused_copy = spec._fuse(sch.copy())  # without a target: the prologue stays in the tile's loads
    assert not [s for s in walk_stmts(lower(unfused_copy, amx).body) if isinstance(s, TileProduct)]
