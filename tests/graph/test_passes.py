"""Each graph pass on a small graph: the structure it promises, and the same outputs as before."""

import numpy as np
import pytest

from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.passes import (
    compute_half_in_float,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    empty_tensors_as_constants,
    fold_batch_norm,
    fold_constants,
    optimize,
    sink_transposes,
    to_channels_last,
)

RNG = np.random.default_rng(3)


def _same_outputs(before, after, **inputs):
    a, b = run_reference(before, inputs), run_reference(after, inputs)
    for name in before.outputs:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-5, atol=1e-6)


def _convnet():
    b = GraphBuilder("net")
    x = b.input("x", TensorType((1, 3, 8, 8), "float32"))
    w1 = b.constant(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1")
    bn = [b.constant(a.astype(np.float32)) for a in (RNG.random(4), RNG.random(4), RNG.random(4), RNG.random(4) + 0.5)]
    c = b.add("conv2d", [x, w1], {"pads": (1, 1, 1, 1)})
    n = b.add("batch_norm", [c, *bn], {"epsilon": 1e-5})
    r = b.add("relu", [n])
    w2 = b.constant(RNG.standard_normal((4, 4, 1, 1)).astype(np.float32), "w2")
    c2 = b.add("conv2d", [r, w2])
    s = b.add("add", [c2, r])
    p = b.add("max_pool2d", [s], {"kernel": (2, 2), "strides": (2, 2)})
    m = b.add("reduce_mean", [p], {"axes": (2, 3), "keepdims": 0})
    return b.build([m])


def test_fold_batch_norm_removes_the_norm_and_keeps_the_values():
    g = _convnet()
    folded = eliminate_dead_code(fold_batch_norm(g))
    assert "batch_norm" not in folded.op_counts()
    _same_outputs(g, folded, x=RNG.standard_normal((1, 3, 8, 8)).astype(np.float32))


def test_channels_last_leaves_one_transpose_at_the_boundary():
    g = _convnet()
    out, fired = optimize(g)
    counts = out.op_counts()
    assert counts.get("transpose", 0) == 1 and "batch_norm" not in counts
    assert all(n.attr("layout") == "NHWC" for n in out.nodes if n.op in ("conv2d", "max_pool2d"))
    assert any(f.startswith("fold_batch_norm") for f in fired) and any(f.startswith("sink_transposes") for f in fired)
    _same_outputs(g, out, x=RNG.standard_normal((1, 3, 8, 8)).astype(np.float32))
    staged = sink_transposes(fold_constants(to_channels_last(g)))
    _same_outputs(g, staged, x=RNG.standard_normal((1, 3, 8, 8)).astype(np.float32))


def test_cse_dce_and_constant_folding():
    b = GraphBuilder()
    x = b.input("x", TensorType((2, 3), "float32"))
    k = b.constant(np.full((3,), 2.0, np.float32))
    k2 = b.add("mul", [k, k])  # constant: folds
    a1 = b.add("transpose", [x], {"perm": (1, 0)})
    a2 = b.add("transpose", [x], {"perm": (1, 0)})  # same as a1: CSE
    b.add("exp", [x])  # unused: DCE
    y = b.add("add", [b.add("add", [a1, a2]), b.add("reshape", [k2], {"shape": (3, 1)})])
    g = b.build([y])
    folded = fold_constants(g)
    assert "mul" not in folded.op_counts()
    out = eliminate_dead_code(eliminate_common_subexpressions(folded))
    assert out.op_counts() == {"transpose": 1, "add": 2}
    _same_outputs(g, out, x=RNG.standard_normal((2, 3)).astype(np.float32))


def test_passes_keep_output_names():
    g = _convnet()
    out, _ = optimize(g)
    assert out.outputs == g.outputs


def test_merge_sibling_matmuls_makes_one_gemm_and_keeps_the_values():
    from tilegraph.graph.passes import merge_sibling_matmuls

    b = GraphBuilder("qkv")
    x = b.input("x", TensorType((1, 5, 8), "float32"))
    outs = []
    for n in (8, 8, 4):
        w = b.constant(RNG.standard_normal((8, n)).astype(np.float32))
        outs.append(b.add("add", [b.add("matmul", [x, w]), b.constant(RNG.standard_normal(n).astype(np.float32))]))
    lone = b.add("matmul", [outs[0], b.constant(RNG.standard_normal((8, 3)).astype(np.float32))])
    g = b.build([outs[1], outs[2], lone])
    fired = []
    merged = eliminate_dead_code(merge_sibling_matmuls(g, fired))
    counts = merged.op_counts()
    assert counts["matmul"] == 2 and counts["add"] == 1 and counts["slice"] == 3 and len(fired) == 1
    assert "with their bias adds" in fired[0] and merged.outputs == g.outputs
    _same_outputs(g, merged, x=RNG.standard_normal((1, 5, 8)).astype(np.float32))
    # a sibling without a bias add: the matmuls still merge, the adds stay
    b2 = GraphBuilder("two")
    x2 = b2.input("x", TensorType((3, 8), "float32"))
    y1 = b2.add("relu", [b2.add("matmul", [x2, b2.constant(RNG.standard_normal((8, 4)).astype(np.float32))])])
    y2 = b2.add("matmul", [x2, b2.constant(RNG.standard_normal((8, 2)).astype(np.float32))])
    g2 = b2.build([y1, y2])
    m2 = merge_sibling_matmuls(g2, [])
    assert m2.op_counts()["matmul"] == 1
    _same_outputs(g2, m2, x=RNG.standard_normal((3, 8)).astype(np.float32))


def test_merge_sibling_matmuls_keeps_integer_products_on_the_integers():
    """uint8 x int8 siblings (a QDQ model's Q, K, V) merge into one product that still accumulates
    in int32; float and integer products never share a family."""
    from tilegraph.graph.passes import merge_sibling_matmuls

    b = GraphBuilder("int8")
    x = b.input("x", TensorType((3, 8), "uint8"))
    ints = [b.add("matmul", [x, b.constant(RNG.integers(-128, 128, (8, n)).astype(np.int8))], {"accumulate": "int32"})
            for n in (4, 5)]
    g = b.build(ints)
    merged = merge_sibling_matmuls(g, [])
    products = [n for n in merged.nodes if n.op == "matmul"]
    assert len(products) == 1 and products[0].attr("accumulate") == "int32"
    _same_outputs(g, merged, x=RNG.integers(0, 256, (3, 8)).astype(np.uint8))

def _conv_nhwc(h, w, c, o, k, stride, pads=(0, 0, 0, 0), groups=1, bias=True):
    b = GraphBuilder("conv")
    x = b.input("x", TensorType((1, h, w, c), "float32"))
    inputs = [x, b.constant(RNG.standard_normal((k, k, c // groups, o)).astype(np.float32))]
    if bias:
        inputs.append(b.constant(RNG.standard_normal(o).astype(np.float32)))
    y = b.add("conv2d", inputs, {"layout": "NHWC", "strides": (stride, stride), "pads": pads, "groups": groups})
    return b.build([b.add("relu", [y])]), RNG.standard_normal((1, h, w, c)).astype(np.float32)


def test_conv_to_gemm_rewrites_1x1_and_patch_convolutions():
    from tilegraph.graph.passes import conv_to_gemm

    for h, w, c, o, k, bias, rule in [(5, 7, 3, 6, 1, True, "1x1"), (9, 11, 3, 5, 4, True, "patch"),
                                      (8, 8, 2, 3, 2, False, "patch")]:
        g, x = _conv_nhwc(h, w, c, o, k, stride=k, bias=bias)
        fired = []
        after = conv_to_gemm(g, fired)
        assert fired == [f"conv_to_gemm: conv2d_0 ({rule} convolution) as a GEMM"]
        assert "conv2d" not in after.op_counts() and after.op_counts()["matmul"] == 1 and after.outputs == g.outputs
        if (h % k or w % k):  # a 9x11 image on a 4x4 grid: the rows and columns past the last patch are cut
            assert after.op_counts()["slice"] == 1
        _same_outputs(g, after, x=x)


def test_conv_to_gemm_leaves_other_convolutions_alone():
    from tilegraph.graph.passes import conv_to_gemm, optimize

    for kwargs in [dict(k=3, stride=1), dict(k=1, stride=2), dict(k=2, stride=2, pads=(1, 1, 1, 1)),
                   dict(k=1, stride=1, groups=2)]:
        g, _ = _conv_nhwc(6, 6, 4, 4, **kwargs)
        fired = []
        assert conv_to_gemm(g, fired) is g and not fired
    g, x = _conv_nhwc(6, 6, 4, 4, k=1, stride=1)
    assert not any("conv_to_gemm" in f for f in optimize(g)[1])  # optional: off by default
    after, fired = optimize(g, extra=("conv_to_gemm",))
    assert any("conv_to_gemm" in f for f in fired)
    _same_outputs(g, after, x=x)
    import pytest

    from tilegraph.errors import GraphError
    with pytest.raises(GraphError, match="unknown optional rewrite"):
        optimize(g, extra=("fold_everything",))


def test_conv_to_gemm_keeps_an_integer_convolution():
    """A QDQ model's uint8 x int8 convolution accumulates in int32: as a plain matmul it would not."""
    from tilegraph.graph.passes import conv_to_gemm

    b = GraphBuilder("int8_conv")
    x = b.input("x", TensorType((1, 4, 4, 8), "uint8"))
    w = b.constant(RNG.integers(-128, 128, (1, 1, 8, 4)).astype(np.int8))
    y = b.add("conv2d", [x, w], {"layout": "NHWC", "accumulate": "int32"})
    g = b.build([y])
    fired = []
    assert conv_to_gemm(g, fired) is g and not fired


def test_fold_scale_into_weights_through_layout_ops():
    from tilegraph.graph.passes import fold_scale_into_weights

    b = GraphBuilder("attention_q")
    x = b.input("x", TensorType((1, 5, 8), "float32"))
    h = b.add("add", [b.add("matmul", [x, b.constant(RNG.standard_normal((8, 8)).astype(np.float32))]),
                      b.constant(RNG.standard_normal(8).astype(np.float32))])
    q = b.add("transpose", [b.add("reshape", [h], {"shape": (1, 5, 2, 4)})], {"perm": (0, 2, 1, 3)})
    scaled = b.add("mul", [b.constant(np.array(0.35, np.float32)), q])
    k = b.add("matmul", [x, b.constant(RNG.standard_normal((8, 4)).astype(np.float32))])
    divided = b.add("div", [k, b.constant(np.array([2.0], np.float32))])
    g = b.build([b.add("relu", [scaled]), b.add("relu", [divided])])
    fired = []
    after = eliminate_dead_code(fold_scale_into_weights(g, fired))
    assert len(fired) == 2 and "mul" not in after.op_counts() and "div" not in after.op_counts()
    assert after.outputs == g.outputs
    _same_outputs(g, after, x=RNG.standard_normal((1, 5, 8)).astype(np.float32))


def test_fold_scale_refuses_shared_or_unscalable_values():
    from tilegraph.graph.passes import fold_scale_into_weights

    b = GraphBuilder("shared")
    x = b.input("x", TensorType((3, 4), "float32"))
    m = b.add("matmul", [x, b.constant(RNG.standard_normal((4, 4)).astype(np.float32))])
    scaled = b.add("mul", [m, b.constant(np.array(3.0, np.float32))])  # m is read twice: no fold
    other = b.add("mul", [b.add("relu", [x]), b.constant(np.array(3.0, np.float32))])  # no matmul
    zero = b.add("div", [b.add("matmul", [x, b.constant(np.ones((4, 2), np.float32))]),
                         b.constant(np.array(0.0, np.float32))])
    vector = b.add("mul", [b.add("matmul", [x, b.constant(np.ones((4, 4), np.float32))]),
                           b.constant(np.arange(4, dtype=np.float32))])  # per-column: not a scalar
    g = b.build([scaled, m, other, zero, vector])
    fired = []
    assert fold_scale_into_weights(g, fired) is g and not fired


def test_a_pass_breaking_an_invariant_is_named_under_tilegraph_verify(monkeypatch):
    """TILEGRAPH_VERIFY=1 (set for the suite) verifies each pass's result."""
    import tilegraph.graph.passes as passes
    from tilegraph.errors import GraphError
    from tilegraph.graph import GraphBuilder, TensorType
    from tilegraph.graph.ir import Graph, Node

    def breaks(graph, fired):
        node = graph.nodes[0]
        return Graph(graph.name, graph.inputs, graph.outputs, (node, Node(node.op, node.inputs, ("other",), node.attrs,
                                                                          node.name)),
                     {**graph.values, "other": graph.values[node.outputs[0]]}, graph.constants)

    b = GraphBuilder()
    x = b.input("x", TensorType((4,), "float32"))
    graph = b.build([b.add("relu", [x], name="r")])
    monkeypatch.setattr(passes, "PIPELINE", (breaks, *passes.PIPELINE))
    monkeypatch.setenv("TILEGRAPH_VERIFY", "1")
    with pytest.raises(GraphError, match="graph pass breaks produced an invalid graph: two nodes are named 'r'"):
        passes.optimize(graph)


def test_compute_half_in_float_wraps_computing_float16_nodes_in_casts():
    b = GraphBuilder("half")
    x = b.input("x", TensorType((4, 8), "float16"))
    w = b.constant(RNG.standard_normal((8, 3)).astype(np.float16), "w")
    t = b.add("transpose", [x], {"perm": (1, 0)})  # data movement stays float16
    y = b.add("matmul", [b.add("transpose", [t], {"perm": (1, 0)}), w])
    g = b.build([b.add("exp", [y])])
    after = compute_half_in_float(g)
    assert after.op_counts()["cast"] == 5 and after.op_counts()["transpose"] == 2  # 2 + 1 around matmul, 1 + 1 exp
    assert all(after.values[o].dtype == "float32" for n in after.nodes if n.op in ("matmul", "exp") for o in n.outputs)
    assert after.values[after.outputs[0]].dtype == "float16" and after.outputs == g.outputs
    x_value = RNG.standard_normal((4, 8)).astype(np.float16)
    _same_outputs(g, after, x=x_value)
    float32_graph = _convnet()
    assert compute_half_in_float(float32_graph) is float32_graph


def test_empty_tensors_become_constants_and_what_reads_only_them_folds():
    b = GraphBuilder("empty")
    data = b.input("data", TensorType((2, 0, 3), "float32"))
    x = b.input("x", TensorType((5, 3), "float32"))
    total = b.add("reduce_sum", [data], {"axes": (1,), "keepdims": 0})    # [2, 3] of zeros
    largest = b.add("reduce_max", [data], {"axes": (1,), "keepdims": 0})  # [2, 3] of -inf
    nothing = b.add("slice", [x], {"begin": (2, 0), "end": (2, 3), "steps": (1, 1)})  # [0, 3]
    joined = b.add("concat", [x, nothing], {"axis": 0})
    g = b.build([total, largest, joined, nothing])
    fired: list[str] = []
    out = fold_constants(empty_tensors_as_constants(g, fired))
    assert out.inputs == ("data", "x")  # the interface keeps the empty input
    assert not any("data" in n.inputs for n in out.nodes)
    assert total in out.constants and largest in out.constants and nothing in out.constants
    assert [n.op for n in out.nodes] == ["concat"] and out.nodes[0].inputs == ("x",)
    np.testing.assert_array_equal(out.constants[total], np.zeros((2, 3)))
    np.testing.assert_array_equal(out.constants[largest], np.full((2, 3), -np.inf))
    assert any("computes nothing" in f for f in fired) and any("drops empty operands" in f for f in fired)
    _same_outputs(g, out, data=np.zeros((2, 0, 3), np.float32), x=RNG.standard_normal((5, 3)).astype(np.float32))


def test_pow_by_two_or_three_becomes_multiplies():
    from tilegraph.graph.passes.pow_to_multiply import pow_to_multiply

    b = GraphBuilder("powers")
    x = b.input("x", TensorType((3, 5), "float32"))
    cube = b.add("pow", [x, b.constant(np.array(3.0, np.float32))])
    square = b.add("pow", [x, b.constant(np.full((5,), 2.0, np.float32))])
    kept = [b.add("pow", [x, b.constant(np.array(2.5, np.float32))]),  # not a small integer
            b.add("pow", [x, b.constant(np.array([2.0, 3.0, 2.0, 2.0, 2.0], np.float32))]),  # mixed
            b.add("pow", [x, b.constant(np.full((2, 3, 5), 2.0, np.float32))])]  # broadcasts x to (2, 3, 5)
    g = b.build([cube, square, *kept])
    fired = []
    after = pow_to_multiply(g, fired)
    assert len(fired) == 2 and after.op_counts()["pow"] == 3 and after.op_counts()["mul"] == 3
    assert after.outputs == g.outputs
    data = RNG.standard_normal((3, 5)).astype(np.float32)
    data[0, :3] = [np.inf, -np.inf, np.nan]
    _same_outputs(g, after, x=data)


def test_a_wide_gemm_with_an_awkward_column_count_is_padded_and_sliced():
    from tilegraph.graph.passes.pad_gemm_columns import ALIGN, pad_gemm_columns

    b = GraphBuilder("head")
    x = b.input("x", TensorType((2, 3, 16), "float32"))
    head = b.add("matmul", [x, b.constant(RNG.standard_normal((16, 2053)).astype(np.float32))])  # 2053: prime
    fine = b.add("matmul", [x, b.constant(RNG.standard_normal((16, 2048)).astype(np.float32))])  # tiles already
    narrow = b.add("matmul", [x, b.constant(RNG.standard_normal((16, 1001)).astype(np.float32))])  # cheap anyway
    g = b.build([head, fine, narrow])
    fired = []
    after = pad_gemm_columns(g, fired)
    assert len(fired) == 1 and "2053 -> 2176" in fired[0] and 2176 % ALIGN == 0
    assert after.op_counts()["slice"] == 1 and after.outputs == g.outputs
    assert after.type_of(head) == g.type_of(head)
    _same_outputs(g, after, x=RNG.standard_normal((2, 3, 16)).astype(np.float32))


def test_an_integer_gemm_pads_narrower_column_counts():
    """An 8-bit product's column tail loses its dot-product steps, so integer weights are padded
    from MIN_COLUMNS_INTEGER columns (a QDQ classifier, 2048 x 1000); the result is exact."""
    from tilegraph.graph.passes.pad_gemm_columns import MIN_COLUMNS_INTEGER, pad_gemm_columns

    b = GraphBuilder("classifier")
    x = b.input("x", TensorType((1, 24), "uint8"))
    exact = {"accumulate": "int32"}
    head = b.add("matmul", [x, b.constant(RNG.integers(-128, 128, (24, 1000)).astype(np.int8))], exact)
    small = b.add("matmul", [x, b.constant(RNG.integers(-128, 128, (24, MIN_COLUMNS_INTEGER - 3)).astype(np.int8))], exact)
    g = b.build([head, small])
    fired = []
    after = pad_gemm_columns(g, fired)
    assert len(fired) == 1 and "1000 -> 1024" in fired[0]
    assert after.type_of(head) == g.type_of(head)
    data = RNG.integers(0, 256, (1, 24)).astype(np.uint8)
    want, got = run_reference(g, {"x": data}), run_reference(after, {"x": data})
    for name in g.outputs:
        np.testing.assert_array_equal(got[name], want[name])
