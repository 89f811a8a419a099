"""If, Loop and Scan whose path is known at compile time (unrolled into the graph), and operators
defined by ONNX function bodies (expanded): each against ONNX Runtime on fresh random inputs."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(17)


def _check(model, feeds, rtol=1e-5):
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    compiled = tg.compile(model)
    got = compiled.run(feeds)
    for name, want in zip(compiled.output_names, expected):
        assert got[name].shape == want.shape, name
        np.testing.assert_allclose(got[name], want, rtol=rtol, atol=1e-6)
    return compiled


def _const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name + "_v"))


@pytest.mark.needs_cc
def test_loop_with_a_constant_trip_count_unrolls_and_stacks_its_scan_output():
    # body: (i, cond, acc) -> (cond, acc * x + i, acc) ; x read from the enclosing scope
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=F),
         helper.make_node("Mul", ["acc", "x"], ["scaled"]),
         helper.make_node("Add", ["scaled", "i_f"], ["acc_out"]),
         helper.make_node("Identity", ["acc"], ["seen"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("acc", F, [3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("acc_out", F, [3]),
         helper.make_tensor_value_info("seen", F, [3])])
    nodes = [_const("trip", np.array(5, np.int64)), _const("go", np.array(True)),
             helper.make_node("Loop", ["trip", "go", "a0"], ["a_final", "history"], body=body)]
    graph = helper.make_graph(nodes, "loop", [helper.make_tensor_value_info("x", F, [3]),
                                              helper.make_tensor_value_info("a0", F, [3])],
                              [helper.make_tensor_value_info("a_final", F, None),
                               helper.make_tensor_value_info("history", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    compiled = _check(model, {"x": RNG.standard_normal(3).astype(np.float32),
                              "a0": RNG.standard_normal(3).astype(np.float32)})
    assert sum(n.op == "mul" for n in compiled.graph.nodes) == 5  # the body once per iteration


@pytest.mark.needs_cc
def test_scan_in_both_directions():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "row"], ["s_out"]), helper.make_node("Mul", ["s_out", "row"], ["y"])], "body",
        [helper.make_tensor_value_info("s", F, [4]), helper.make_tensor_value_info("row", F, [4])],
        [helper.make_tensor_value_info("s_out", F, [4]), helper.make_tensor_value_info("y", F, [4])])
    scan = helper.make_node("Scan", ["s0", "seq"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                            scan_output_directions=[0])
    graph = helper.make_graph([scan], "scan", [helper.make_tensor_value_info("s0", F, [4]),
                                               helper.make_tensor_value_info("seq", F, [4, 5])],
                              [helper.make_tensor_value_info("s_final", F, None),
                               helper.make_tensor_value_info("ys", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    _check(model, {"s0": RNG.standard_normal(4).astype(np.float32), "seq": RNG.standard_normal((4, 5)).astype(np.float32)})


def _if_model():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["o"])], "else", [],
                              [helper.make_tensor_value_info("o", F, [2, 3])])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "if",
                              [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("c", B, [])],
                              [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


@pytest.mark.needs_cc
def test_if_on_a_run_time_condition_specialises_on_it():
    model = _if_model()
    compiled = tg.compile(model)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    for c in (True, False, True):
        np.testing.assert_array_equal(compiled.run({"x": x, "c": np.array(c)})["y"], np.maximum(x, 0) if c else -x)
    assert compiled.variants == 2


@pytest.mark.needs_cc
def test_a_loop_whose_condition_the_data_decides_is_refused_by_name():
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "x"], ["v_out"]), helper.make_node("ReduceSum", ["v_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_value_info("v", F, [3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("v_out", F, [3])])
    nodes = [_const("limit", np.array(10.0, np.float32)), _const("go", np.array(True)),
             helper.make_node("Loop", ["", "go", "v0"], ["v_final"], body=body)]
    graph = helper.make_graph(nodes, "while", [helper.make_tensor_value_info("x", F, [3]),
                                               helper.make_tensor_value_info("v0", F, [3])],
                              [helper.make_tensor_value_info("v_final", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    compiled = tg.compile(model)  # specialises on v0, a Loop input; the condition still needs x
    with pytest.raises(GraphError, match=r"\(Loop\) condition after iteration 0 must be a constant"):
        compiled.run({"x": RNG.random(3).astype(np.float32), "v0": np.zeros(3, np.float32)})


@pytest.mark.needs_cc
def test_rotary_embedding_compiles_as_its_function_body():
    shape = (2, 3, 5, 8)  # batch, heads, sequence, head size
    inputs = [helper.make_tensor_value_info("x", F, shape), helper.make_tensor_value_info("cos", F, [2, 5, 4]),
              helper.make_tensor_value_info("sin", F, [2, 5, 4])]
    graph = helper.make_graph([helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], interleaved=1)],
                              "rope", inputs, [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    compiled = _check(model, {"x": RNG.standard_normal(shape).astype(np.float32),
                              "cos": RNG.standard_normal((2, 5, 4)).astype(np.float32),
                              "sin": RNG.standard_normal((2, 5, 4)).astype(np.float32)})
    assert {"mul", "concat"} <= {n.op for n in compiled.graph.nodes}  # the body's ops, no opaque node
