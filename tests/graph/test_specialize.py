"""Models whose shapes depend on input values (a reduction's axes, a Reshape's shape given as
graph inputs) specialise on those values: one compiled variant per value set, made at the first
run with it, each checked against numpy; `values=` binds them up front; bad values are one line."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError
from tilegraph.graph.specialize import MAX_VARIANTS, SpecializedModel

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

RNG = np.random.default_rng(5)


def _reduce_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x, axes], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _reshape_model():
    """The target shape is computed from an input (shape + 0): specialise on `shape`, not on `x`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    zero = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
    nodes = [helper.make_node("Add", ["shape", "zero"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x, shape], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [zero])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.needs_cc
def test_each_value_compiles_one_variant_and_reuses_it():
    model = tg.compile(_reduce_model())
    assert isinstance(model, SpecializedModel) and model.value_inputs == ("axes",)
    assert model.input_names == ("x", "axes") and model.output_names == ("y",)
    for axis in (1, 2, 1, -1, 0):
        x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
        y = model.run({"x": x, "axes": np.array([axis])})["y"]
        np.testing.assert_allclose(y, np.maximum(x.astype(np.float64).sum(axis), 0), rtol=1e-5, atol=1e-6)
    assert model.variants == 4  # 1, 2, -1 and 0 (-1 is another value, though the same axis)
    (y,) = model(np.ones((3, 4, 5), np.float32), np.array([2]))
    assert y.shape == (3, 4) and np.all(y == 5)


@pytest.mark.needs_cc
def test_the_deciding_inputs_are_found_through_the_nodes_that_compute_from_them():
    model = tg.compile(_reshape_model())
    assert model.value_inputs == ("shape",)
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    for shape in ([3, 4], [12, 1], [4, -1]):
        y = model.run({"x": x, "shape": np.array(shape)})["y"]
        np.testing.assert_array_equal(y, x.reshape(shape))


@pytest.mark.needs_cc
def test_values_bind_up_front_and_that_model_saves(tmp_path):
    model = tg.compile(_reduce_model(), values={"axes": [2]})
    assert model.input_names == ("x",)
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(model.run({"x": x})["y"], np.maximum(x.sum(2), 0), rtol=1e-5, atol=1e-6)
    model.save(tmp_path / "m")
    loaded = tg.load(tmp_path / "m")
    np.testing.assert_allclose(loaded.run({"x": x})["y"], np.maximum(x.sum(2), 0), rtol=1e-5, atol=1e-6)


@pytest.mark.needs_cc
def test_a_specialised_model_refuses_to_save_and_names_how():
    model = tg.compile(_reduce_model())
    with pytest.raises(GraphError, match=r"model.variant\(\{\.\.\.\}\).save"):
        model.save("/nonexistent/never")
    variant = model.variant({"axes": np.array([0])})
    assert variant.run({"x": np.ones((3, 4, 5), np.float32)})["y"].shape == (4, 5)


@pytest.mark.needs_cc
def test_more_values_than_the_limit_is_one_error_not_a_recompilation_storm():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [12])
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g", [x, shape],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = tg.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    shapes = [[a, 12 // a] for a in (1, 2, 3, 4, 6, 12)] + [[-1, 1], [-1, 2]]
    assert len(shapes) == MAX_VARIANTS
    for s in shapes:
        model.run({"x": np.arange(12, dtype=np.float32), "shape": np.array(s)})
    with pytest.raises(GraphError, match="more than 8 different values"):
        model.run({"x": np.arange(12, dtype=np.float32), "shape": np.array([-1, 3])})


@pytest.mark.parametrize("values, message", [
    ({"axes": np.array([1.0], np.float32)}, "is float32, the model takes int64"),
    ({"axes": [1, 2]}, r"has shape \[2\], the model takes \[1\]"),
    ({"axes": [1.5]}, "is not exactly a int64"),
    ({"nope": [1]}, "not model inputs"),
])
def test_bad_values_are_one_line(values, message):
    with pytest.raises(GraphError, match=message):
        tg.compile(_reduce_model(), values=values)


def test_values_apply_to_onnx_models_only():
    g = tg.graph.GraphBuilder("g")
    x = g.input("x", tg.graph.TensorType((2,), "float32"))
    with pytest.raises(GraphError, match="ONNX model"):
        tg.compile(g.build([g.add("relu", [x])]), values={"x": [1, 2]})
