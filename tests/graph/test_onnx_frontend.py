"""The ONNX frontend, op by op: one-node models made with onnx.helper, compiled (time_budget=0)
and checked against ONNX Runtime on fresh random inputs; and every kind of bad model file."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError, ModelFileError, UnsupportedOpError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(11)


def _model(op, inputs, output_shape=None, attrs=None, inits=(), opset=18, outputs=1, out_type=F):
    """inputs: [(name, elem type, shape)]; inits: [(name, array)] as initializers."""
    init_names = [n for n, _ in inits]
    node = helper.make_node(op, [n for n, *_ in inputs] + init_names, [f"y{i}" for i in range(outputs)], **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(f"y{i}", out_type[i] if isinstance(out_type, list) else out_type, None)
         for i in range(outputs)],
        [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _feeds(model):
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        kind = vi.type.tensor_type.elem_type
        if kind in (TensorProto.UINT8, TensorProto.INT8):
            low, high = (0, 256) if kind == TensorProto.UINT8 else (-128, 128)
            feeds[vi.name] = RNG.integers(low, high, shape).astype(np.uint8 if low == 0 else np.int8)
            continue
        feeds[vi.name] = (RNG.standard_normal(shape).astype(np.float32) if kind == F else
                          RNG.integers(0, 3, shape).astype(np.int64) if kind == I64 else RNG.random(shape) < 0.5)
    return feeds


def check(model, rtol=1e-4):
    feeds = _feeds(model)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    compiled = tg.compile(model)
    got = compiled.run(feeds)
    for name, e in zip(compiled.output_names, expected):
        assert got[name].shape == e.shape and got[name].dtype == e.dtype, name
        np.testing.assert_allclose(got[name].astype(np.float64), e.astype(np.float64), rtol=rtol, atol=1e-5)
    return compiled


X = ("x", F, [2, 3, 5, 7])
W = ("w", RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
CASES = {
    "Relu": _model("Relu", [X]), "Sigmoid": _model("Sigmoid", [X]), "Tanh": _model("Tanh", [X]),
    "Exp": _model("Exp", [X]), "Erf": _model("Erf", [X]), "Neg": _model("Neg", [X]), "Abs": _model("Abs", [X]),
    "HardSigmoid": _model("HardSigmoid", [X], attrs={"alpha": 0.3, "beta": 0.4}), "HardSwish": _model("HardSwish", [X]),
    "Gelu": _model("Gelu", [X], opset=20), "GeluTanh": _model("Gelu", [X], attrs={"approximate": "tanh"}, opset=20),
    "Clip": _model("Clip", [X], inits=[("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.5, np.float32))]),
    "Add": _model("Add", [X, ("b", F, [3, 1, 7])]), "Sub": _model("Sub", [X, ("b", F, [7])]),
    "Mul": _model("Mul", [X, ("b", F, [1, 3, 1, 1])]), "Div": _model("Div", [X], inits=[("d", np.array(3.0, np.float32))]),
    "Pow": _model("Pow", [X], inits=[("p", np.array(2.0, np.float32))]),
    "Sqrt": _model("Sqrt", [X], inits=[]),
    "Where": _model("Where", [("c", B, [5, 7]), X, ("b", F, [7])]),
    "Equal": _model("Equal", [("a", I64, [4, 3]), ("b", I64, [3])], out_type=B),
    "Cast": _model("Cast", [X], attrs={"to": I64}, out_type=I64),
    "MatMul": _model("MatMul", [("a", F, [2, 3, 5, 4]), ("b", F, [4, 6])]),
    "MatMulBatched": _model("MatMul", [("a", F, [2, 1, 5, 4]), ("b", F, [3, 4, 6])]),
    "MatMulVector": _model("MatMul", [("a", F, [5, 4]), ("b", F, [4])]),
    "Gemm": _model("Gemm", [("a", F, [3, 5])], attrs={"transB": 1, "alpha": 0.5, "beta": 2.0},
                   inits=[("b", RNG.standard_normal((4, 5)).astype(np.float32)), ("c", np.ones(4, np.float32))]),
    "Conv": _model("Conv", [X], attrs={"pads": [1, 1, 1, 1]}, inits=[W]),
    "ConvStridedDilatedBias": _model("Conv", [("x", F, [1, 3, 11, 9])], attrs={"strides": [2, 2], "dilations": [2, 1],
                                     "pads": [2, 1, 2, 1]}, inits=[W, ("bias", np.arange(4, dtype=np.float32))]),
    "ConvGroupsAsymmetric": _model("Conv", [("x", F, [1, 4, 8, 8])], attrs={"group": 2, "pads": [0, 1, 1, 0]},
                                   inits=[("w", RNG.standard_normal((6, 2, 3, 3)).astype(np.float32))]),
    "ConvAsymmetricStrided": _model("Conv", [("x", F, [1, 3, 9, 8])], attrs={"strides": [2, 2], "pads": [0, 1, 2, 0]},
                                    inits=[W]),
    "ConvDepthwiseSame": _model("Conv", [("x", F, [1, 4, 7, 7])], attrs={"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]},
                                inits=[("w", RNG.standard_normal((4, 1, 3, 3)).astype(np.float32))]),
    "BatchNormalization": _model("BatchNormalization", [X], inits=[
        ("s", RNG.random(3).astype(np.float32)), ("b", RNG.random(3).astype(np.float32)),
        ("m", RNG.random(3).astype(np.float32)), ("v", RNG.random(3).astype(np.float32) + 0.5)]),
    "Softmax": _model("Softmax", [X], attrs={"axis": 1}),
    "LayerNormalization": _model("LayerNormalization", [X], attrs={"axis": -2},
                                 inits=[("s", RNG.random((5, 7)).astype(np.float32)),
                                        ("b", RNG.random((5, 7)).astype(np.float32))]),
    "ReduceMean": _model("ReduceMean", [X], inits=[("axes", np.array([1, 3], np.int64))]),
    "ReduceSum": _model("ReduceSum", [X], attrs={"keepdims": 0}, inits=[("axes", np.array([-1], np.int64))]),
    "ReduceMax": _model("ReduceMax", [X], opset=17, attrs={"axes": [2]}),
    "MaxPool": _model("MaxPool", [X], attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "MaxPoolCeil": _model("MaxPool", [X], attrs={"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    "AveragePool": _model("AveragePool", [X], attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "AveragePoolIncludePad": _model("AveragePool", [X], attrs={"kernel_shape": [3, 2], "pads": [1, 0, 1, 0],
                                                                "count_include_pad": 1}),
    "GlobalAveragePool": _model("GlobalAveragePool", [X]),
    "Reshape": _model("Reshape", [X], inits=[("s", np.array([0, -1, 7], np.int64))]),
    "Transpose": _model("Transpose", [X], attrs={"perm": [0, 3, 1, 2]}),
    "Flatten": _model("Flatten", [X], attrs={"axis": 2}),
    "Squeeze": _model("Squeeze", [("x", F, [2, 1, 5])], inits=[("a", np.array([1], np.int64))]),
    "Unsqueeze": _model("Unsqueeze", [("x", F, [2, 5])], inits=[("a", np.array([0, 3], np.int64))]),
    "Concat": _model("Concat", [X, ("b", F, [2, 1, 5, 7])], attrs={"axis": 1}),
    "Split": _model("Split", [X], attrs={"axis": 3}, inits=[("s", np.array([2, 5], np.int64))], outputs=2),
    "Slice": _model("Slice", [X], inits=[("st", np.array([4, 1], np.int64)), ("en", np.array([-100, 5], np.int64)),
                                         ("ax", np.array([3, 2], np.int64)), ("sp", np.array([-2, 2], np.int64))]),
    "Gather": _model("Gather", [("x", F, [10, 4]), ("i", I64, [2, 3])], attrs={"axis": 0}),
    "GatherScalar": _model("Gather", [X], attrs={"axis": 1}, inits=[("i", np.array(-1, np.int64))]),
    "GatherElements": _model("GatherElements", [("x", F, [3, 4]), ("i", I64, [3, 2])], attrs={"axis": 1}),
    "Expand": _model("Expand", [("x", F, [3, 1])], inits=[("s", np.array([2, 1, 4], np.int64))]),
    "Pad": _model("Pad", [X], inits=[("p", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)), ("v", np.array(0.5, np.float32))]),
    "IsNaN": _model("IsNaN", [X], out_type=B),
    "Identity": _model("Identity", [X]),
    # operators written with graph ops (onnx_math_ops, onnx_nn_ops, onnx_resize, onnx_loss_ops, onnx_attention)
    "Sin": _model("Sin", [X], opset=22), "Atan": _model("Atan", [X], opset=22), "Round": _model("Round", [X]),
    "Softplus": _model("Softplus", [X], opset=22), "Mish": _model("Mish", [X], opset=22),
    "Selu": _model("Selu", [X], opset=22), "Celu": _model("Celu", [X]), "PRelu": _model("PRelu", [X, ("s", F, [5, 1])]),
    "Shrink": _model("Shrink", [X], attrs={"lambd": 0.3, "bias": 0.1}),
    "LogSoftmax": _model("LogSoftmax", [X], attrs={"axis": 2}),
    "ArgMaxLast": _model("ArgMax", [("a", I64, [4, 3])], attrs={"axis": 1, "select_last_index": 1}, out_type=I64),
    "ReduceLogSumExp": _model("ReduceLogSumExp", [X], inits=[("axes", np.array([1, 3], np.int64))]),
    "ReduceL2": _model("ReduceL2", [X], attrs={"keepdims": 0}, inits=[("axes", np.array([-1], np.int64))]),
    "Trilu": _model("Trilu", [X], inits=[("k", np.array(-1, np.int64))], attrs={"upper": 0}),
    "ModInt": _model("Mod", [("a", I64, [4, 3])], inits=[("b", np.array([-3, 2, 5], np.int64))], out_type=I64),
    "InstanceNormalization": _model("InstanceNormalization", [X], inits=[
        ("s", RNG.random(3).astype(np.float32)), ("b", RNG.random(3).astype(np.float32))]),
    "GroupNormalization": _model("GroupNormalization", [("x", F, [2, 6, 5, 3])], opset=21, attrs={"num_groups": 3},
                                 inits=[("s", RNG.random(6).astype(np.float32)), ("b", RNG.random(6).astype(np.float32))]),
    "Conv1d": _model("Conv", [("x", F, [2, 3, 17])], attrs={"pads": [2, 1], "strides": [2], "dilations": [2]},
                     inits=[("w", RNG.standard_normal((4, 3, 3)).astype(np.float32))]),
    "ConvTranspose": _model("ConvTranspose", [("x", F, [1, 4, 5, 6])], attrs={"strides": [2, 3], "pads": [1, 0, 0, 1],
                                                                              "output_padding": [1, 0], "group": 2},
                            inits=[("w", RNG.standard_normal((4, 3, 3, 2)).astype(np.float32))]),
    "ResizeLinear": _model("Resize", [X], attrs={"mode": "linear"},
                           inits=[("roi", np.array([], np.float32)), ("sc", np.array([1, 1, 2, 1.5], np.float32))]),
    "ResizeCubicSizes": _model("Resize", [X], attrs={"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
                               inits=[("roi", np.array([], np.float32)), ("sc", np.array([], np.float32)),
                                      ("sz", np.array([2, 3, 3, 11], np.int64))]),
    "Tile": _model("Tile", [("x", F, [2, 3])], inits=[("r", np.array([2, 3], np.int64))]),
    "DepthToSpace": _model("DepthToSpace", [("x", F, [1, 8, 2, 3])], attrs={"blocksize": 2, "mode": "CRD"}),
    # onnx_pooling, onnx_index_ops (TopK), onnx_signal_ops, onnx_nn_ops (LRN, ReverseSequence), onnx_grid_ops
    "MaxPool3dDilated": _model("MaxPool", [("x", F, [1, 2, 5, 6, 7])], attrs={
        "kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "dilations": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}),
    "AveragePoolCeilUncounted": _model("AveragePool", [("x", F, [1, 3, 7, 6])], attrs={
        "kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 0, 1], "ceil_mode": 1}),
    "AveragePool3dSameUpper": _model("AveragePool", [("x", F, [2, 1, 5, 4, 3])], attrs={
        "kernel_shape": [2, 3, 2], "auto_pad": "SAME_UPPER", "count_include_pad": 1}),
    "TopK": _model("TopK", [("x", F, [3, 11, 2])], attrs={"axis": 1}, inits=[("k", np.array([4], np.int64))],
                   outputs=2, out_type=[F, I64]),
    "TopKSmallest": _model("TopK", [("x", F, [5, 7])], attrs={"largest": 0}, inits=[("k", np.array([7], np.int64))],
                           outputs=2, out_type=[F, I64]),
    "DFTComplexAxis1": _model("DFT", [("x", F, [2, 7, 3, 2])], opset=20, inits=[
        ("n", np.array(9, np.int64)), ("a", np.array(1, np.int64))]),
    "DFTOnesided": _model("DFT", [("x", F, [3, 10, 1])], opset=20, attrs={"onesided": 1}),
    "LRN": _model("LRN", [X], attrs={"size": 5, "alpha": 0.01, "beta": 0.6, "bias": 1.5}),
    "ReverseSequence": _model("ReverseSequence", [("x", F, [5, 3, 2])], attrs={"time_axis": 0, "batch_axis": 1},
                              inits=[("lens", np.array([5, 1, 3], np.int64))]),
    "GridSampleCubicReflection": _model("GridSample", [("x", F, [2, 3, 5, 7]), ("g", F, [2, 4, 6, 2])], opset=20,
                                        attrs={"mode": "cubic", "padding_mode": "reflection"}),
    "GridSampleNearestBorder": _model("GridSample", [("x", F, [1, 2, 4, 3]), ("g", F, [1, 5, 3, 2])], opset=20,
                                      attrs={"mode": "nearest", "padding_mode": "border", "align_corners": 1}),
    "GridSampleVolumeZeros": _model("GridSample", [("x", F, [1, 2, 3, 4, 5]), ("g", F, [1, 2, 3, 2, 3])], opset=20),
    "MaxPoolIndices": _model("MaxPool", [("x", F, [2, 3, 7, 6])], outputs=2, out_type=[F, I64], attrs={
        "kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}),
    "MaxPoolIndicesColumnMajor": _model("MaxPool", [("x", F, [1, 2, 5, 5])], outputs=2, out_type=[F, I64], attrs={
        "kernel_shape": [2, 2], "storage_order": 1}),
    "EinsumDiagonal": _model("Einsum", [("x", F, [3, 4, 4])], attrs={"equation": "bii->bi"}),
    "ConvInteger": _model("ConvInteger", [("x", TensorProto.UINT8, [1, 2, 5, 6])], attrs={"pads": [1, 0, 0, 1]},
                          inits=[("w", RNG.integers(0, 256, (3, 2, 2, 3)).astype(np.uint8)),
                                 ("xz", np.array(131, np.uint8)), ("wz", np.array(7, np.uint8))],
                          out_type=TensorProto.INT32),
    "QLinearConv": _model("QLinearConv", [("x", TensorProto.UINT8, [1, 2, 6, 5])], attrs={"strides": [2, 1]},
                          inits=[("xs", np.array(0.02, np.float32)), ("xz", np.array(128, np.uint8)),
                                 # 7-bit weights, as quantize_static(reduce_range=True) makes: ONNX Runtime's
                                 # u8 x s8 kernels on CPUs without VNNI sum pairs in int16 (vpmaddubsw) and
                                 # saturate on full-range ones (seen on an AVX2 Zen 3)
                                 ("w", RNG.integers(-64, 64, (4, 2, 3, 3)).astype(np.int8)),
                                 ("ws", np.array([0.01, 0.02, 0.005, 0.03], np.float32)),
                                 ("wz", np.zeros(4, np.int8)), ("ys", np.array(0.05, np.float32)),
                                 ("yz", np.array(120, np.uint8)), ("b", np.array([5, -7, 100, 0], np.int32))],
                          out_type=TensorProto.UINT8),
    "Det": _model("Det", [("x", F, [2, 3, 4, 4])], opset=22),
    "Col2Im": _model("Col2Im", [("x", F, [2, 12, 10])], opset=18, attrs={"strides": [2, 1], "pads": [1, 0, 0, 1]},
                     inits=[("image", np.array([4, 5], np.int64)), ("block", np.array([2, 2], np.int64))]),
    "TensorScatterCircular": _model("TensorScatter", [("past", F, [2, 3, 5, 4]), ("update", F, [2, 3, 2, 4])],
                                    opset=24, attrs={"mode": "circular"}, inits=[("w", np.array([4, 1], np.int64))]),
    "Conv3d": _model("Conv", [("x", F, [2, 4, 5, 6, 7])], attrs={"strides": [2, 1, 2], "dilations": [1, 2, 1],
                                                              "pads": [1, 0, 1, 0, 2, 1], "group": 2},
                     inits=[("w", RNG.standard_normal((6, 2, 3, 2, 3)).astype(np.float32)),
                            ("b", RNG.standard_normal(6).astype(np.float32))]),
    "ConvTranspose3d": _model("ConvTranspose", [("x", F, [1, 2, 3, 4, 3])],
                              attrs={"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1], "output_padding": [1, 0, 0]},
                              inits=[("w", RNG.standard_normal((2, 3, 3, 2, 2)).astype(np.float32))]),
    "AffineGrid": _model("AffineGrid", [("t", F, [2, 2, 3])], opset=20, attrs={"align_corners": 0},
                         inits=[("size", np.array([2, 3, 4, 5], np.int64))]),
}


@pytest.mark.needs_cc
@pytest.mark.extended  # one per op, 115 models: CI's extended run
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case):
    check(CASES[case])


@pytest.mark.needs_cc
def test_shape_subgraphs_fold_to_constants():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, plus ConstantOfShape and Range: no node survives
    but the reshape (a view) and the add."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("ConstantOfShape", ["last"], ["ones"], value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Range", ["start", "limit", "delta"], ["rng"]),
        helper.make_node("Cast", ["rng"], ["rngf"], to=F),
        helper.make_node("Add", ["r", "ones"], ["a"]),
        helper.make_node("Add", ["a", "rngf"], ["y0"]),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("zero", np.array(0, np.int64)), ("zero1", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64)),
        ("last", np.array([35], np.int64)), ("start", np.array(0, np.int64)), ("limit", np.array(35, np.int64)),
        ("delta", np.array(1, np.int64))]]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 5, 7])],
                              [helper.make_tensor_value_info("y0", F, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    compiled = check(model)
    assert sorted(compiled.graph.op_counts()) == ["add", "reshape"]


def test_unsupported_ops_are_all_named_before_compiling():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("NonZero", ["a"], ["b"], name="e1"),
             helper.make_node("MaxRoiPool", ["b", "k"], ["y0"], name="t1",
                                                                      pooled_shape=[1, 1]),
             helper.make_node("NonZero", ["b"], ["c"], name="e2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y0", F, None)],
                              [numpy_helper.from_array(np.array([1], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(UnsupportedOpError) as info:
        tg.graph.from_onnx(model)
    message = str(info.value)
    assert "NonZero (nodes: e1, e2)" in message and "MaxRoiPool (nodes: t1)" in message and "opset 18" in message
    assert "\n" not in message


@pytest.mark.needs_cc
def test_unsupported_ops_on_constants_fold_away_and_only_the_rest_is_refused():
    """Fold first, then judge: an operator tilegraph does not compile (NonZero: its output shape
    depends on the data) on constants is evaluated by ONNX's reference evaluator; on a run-time
    input it is refused, naming that node."""
    m = RNG.standard_normal((3, 3)).astype(np.float32)
    nodes = [helper.make_node("NonZero", ["m"], ["nz"], name="nonzero_of_weights"),
             helper.make_node("Cast", ["nz"], ["nzf"], to=F),
             helper.make_node("ReduceSum", ["nzf"], ["d"], keepdims=0),
             helper.make_node("Mul", ["x", "d"], ["y0"], name="scale")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y0", F, None)], [numpy_helper.from_array(m, "m")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    compiled = check(model)
    assert sorted(compiled.graph.op_counts()) == ["mul"]
    nodes[0] = helper.make_node("NonZero", ["x2"], ["nz"], name="nonzero_of_input")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3]),
                                           helper.make_tensor_value_info("x2", F, [3, 3])],
                              [helper.make_tensor_value_info("y0", F, None)])
    with pytest.raises(UnsupportedOpError,
                       match=r"uses 1 unsupported operator type\(s\): NonZero \(nodes: nonzero_of_input\)"):
        tg.graph.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


@pytest.mark.needs_cc
def test_models_older_than_opset_13_are_upgraded():
    """Opset 9: Slice's bounds and ReduceSum's axes are attributes; onnx.version_converter moves them."""
    nodes = [helper.make_node("Slice", ["x"], ["s"], starts=[1], ends=[4], axes=[1]),
             helper.make_node("ReduceSum", ["s"], ["y0"], axes=[0], keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [3, 6])],
                              [helper.make_tensor_value_info("y0", F, None)])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]))


@pytest.mark.needs_cc
def test_float16_models_compute_in_float32_and_round_per_operator():
    H = TensorProto.FLOAT16
    node = helper.make_node("MatMul", ["a", "b"], ["y0"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", H, [3, 64]),
                                            helper.make_tensor_value_info("b", H, [64, 5])],
                              [helper.make_tensor_value_info("y0", H, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    a, b = (RNG.standard_normal(s).astype(np.float16) for s in ((3, 64), (64, 5)))
    got = tg.compile(model).run({"a": a, "b": b})["y0"]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))


def test_bad_files_give_one_line(tmp_path):
    good = CASES["Relu"]
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.SerializeToString()[:25])
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\x00not a model" * 10)
    for path in (truncated, garbage):
        with pytest.raises(ModelFileError, match="not a readable ONNX model"):
            tg.graph.from_onnx(path)
    with pytest.raises(ModelFileError, match="no such ONNX file"):
        tg.graph.from_onnx(tmp_path / "missing.onnx")
    assert tg.graph.from_onnx(_model("Relu", [X], opset=5)).op_counts() == {"relu": 1}  # upgraded as 7..12 are
    with pytest.raises(ModelFileError, match="opset 99 is newer than the installed onnx"):
        tg.graph.from_onnx(_model("Relu", [X], opset=99))
    symbolic = _model("Relu", [("x", F, ["batch", 3])])
    with pytest.raises(GraphError, match="symbolic extent 'batch'"):
        tg.graph.from_onnx(symbolic)
    assert tg.graph.from_onnx(symbolic, input_shapes={"x": (2, 3)}).values["x"].shape == (2, 3)


@pytest.mark.needs_cc
def test_external_data_loads_and_its_absence_is_named(tmp_path):
    weight = RNG.standard_normal((64, 64)).astype(np.float32)
    model = _model("MatMul", [("a", F, [2, 64])], inits=[("b", weight)])
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.data",
                    size_threshold=0)
    assert (tmp_path / "weights.data").exists()
    a = RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_allclose(tg.compile(path)(a)[0], a @ weight, rtol=1e-4, atol=1e-5)
    (tmp_path / "weights.data").unlink()
    with pytest.raises(ModelFileError, match="external data is missing"):
        tg.graph.from_onnx(path)


@pytest.mark.needs_cc
def test_max_unpool_puts_the_pooled_values_back_where_max_pool_found_them():
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3, 6, 4])],
                              [helper.make_tensor_value_info("y", F, None)])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))


@pytest.mark.needs_cc
def test_deform_conv_with_groups_offset_groups_mask_and_bias():
    # out [2, 6, 3, 5]: height (6 + 1 + 0 - 2) // 2 + 1 = 3, width (5 + 1 + 1 - 3) + 1 = 5
    node = helper.make_node("DeformConv", ["x", "w", "off", "b", "m"], ["y"], group=2, offset_group=2, strides=[2, 1],
                            pads=[1, 1, 0, 1], kernel_shape=[2, 3])
    inputs = [helper.make_tensor_value_info(n, F, s) for n, s in
              (("x", [2, 4, 6, 5]), ("off", [2, 2 * 2 * 6, 3, 5]), ("m", [2, 2 * 6, 3, 5]))]
    inits = [numpy_helper.from_array(RNG.standard_normal((6, 2, 2, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(6).astype(np.float32), "b")]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))


@pytest.mark.needs_cc
@pytest.mark.parametrize("mode, transform", [("avg", "half_pixel"), ("avg", "output_half_pixel"), ("max", "half_pixel")])
def test_roi_align_samples_each_bin_like_onnxruntime(mode, transform):
    rois = np.array([[0.5, 1.0, 6.3, 4.9], [-2.0, -1.5, 3.0, 2.0], [4.0, 3.0, 9.5, 8.0], [1.0, 1.0, 1.2, 1.1]], np.float32)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=3, output_width=2,
                            sampling_ratio=2, spatial_scale=0.9, mode=mode, coordinate_transformation_mode=transform)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [2, 3, 8, 7])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(rois, "rois"),
                               numpy_helper.from_array(np.array([0, 1, 1, 0], np.int64), "batch")])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]))  # ORT runs RoiAlign-16


@pytest.mark.needs_cc
def test_an_opset_8_scan_keeps_its_batch_axis_through_the_upgrade():
    """onnx.version_converter's Scan 8 -> 9 adapter drops the batch axis from the model's inputs
    and outputs; Reshapes at the boundary keep the interface the model declares."""
    body = helper.make_graph([helper.make_node("Add", ["s", "row"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y"])], "body",
                             [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("row", F, [2])],
                             [helper.make_tensor_value_info("s_out", F, [2]), helper.make_tensor_value_info("y", F, [2])])
    scan = helper.make_node("Scan", ["", "s0", "xs"], ["total", "partial"], body=body, num_scan_inputs=1)
    graph = helper.make_graph([scan], "g", [helper.make_tensor_value_info("s0", F, [1, 2]),
                                            helper.make_tensor_value_info("xs", F, [1, 4, 2])],
                              [helper.make_tensor_value_info("total", F, [1, 2]),
                               helper.make_tensor_value_info("partial", F, [1, 4, 2])])
    compiled = check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=8))
    assert compiled.graph.type_of("s0").shape == (1, 2) and compiled.graph.type_of("partial").shape == (1, 4, 2)


@pytest.mark.needs_cc
def test_max_unpool_with_an_output_shape_reads_indices_into_that_shape_like_onnxruntime():
    """MaxPool over a 5 x 7 input gives 2 x 3 outputs (and indices into the 5 x 7 plane); unpooling
    them into output_shape 5 x 7 puts each value back where it came from."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i", "shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3, 5, 7])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(np.array([2, 3, 5, 7], np.int64), "shape")])
    compiled = check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))
    assert compiled.graph.type_of("y").shape == (2, 3, 5, 7)
