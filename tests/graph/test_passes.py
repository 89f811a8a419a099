"""Each graph pass on a small graph: the structure it promises, and the same outputs as before."""

import numpy as np

from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.passes import (
    eliminate_common_subexpressions,
    eliminate_dead_code,
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
