"""The graph-level reliability probe's defects (issue 35; shared/research/reliability_probe_graph.md),
one regression test each: ONNX models made with onnx.helper, compiled with the default (BLP) and
the greedy orchestration, against ONNX Runtime; bad models and arguments as one typed line."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError, ResourceError
from tilegraph.graph.index_checks import IndexOutOfRange

pytestmark = pytest.mark.needs_cc
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "probe", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _matches_ort(model, feeds, orchestrations=("blp", "greedy")):
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    for orchestration in orchestrations:
        compiled = tg.compile(model, orchestration=orchestration)
        got = compiled.run(feeds)
        for name, expected in zip(compiled.output_names, want):
            np.testing.assert_allclose(got[name], expected, rtol=1e-5, atol=1e-6, err_msg=orchestration)


RNG = np.random.default_rng(35)


def test_a_scalar_index_gather_and_its_reshape_get_distinct_names():
    """x[:, 0] (BERT's pooler): the gather and the frontend's reshape once shared the node's name."""
    index = helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array(0, np.int64)))
    nodes = [index, helper.make_node("Gather", ["x", "i"], ["p"], axis=1, name="select"),
             helper.make_node("Relu", ["p"], ["y"], name="act")]
    _matches_ort(_model(nodes, [("x", F, [2, 3, 4])], [("y", F)]),
                 {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)})


@pytest.mark.parametrize("op", ["Sum", "Max", "Min"])
def test_variadic_ops_of_three_inputs(op):
    nodes = [helper.make_node(op, ["a", "b", "c"], ["s"], name="v"), helper.make_node("MatMul", ["s", "w"], ["y"])]
    model = _model(nodes, [(n, F, [3, 4]) for n in "abc"], [("y", F)],
                   [("w", RNG.standard_normal((4, 2)).astype(np.float32))])
    _matches_ort(model, {n: RNG.standard_normal((3, 4)).astype(np.float32) for n in "abc"})


def test_onnx_nodes_sharing_a_name_are_refused_as_onnxruntime_does():
    """The probe's KeyError after a successful compile; ONNX Runtime refuses the file, so does tilegraph.
    Unnamed nodes (name "") are many in real files and stay accepted."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="same"), helper.make_node("Neg", ["a"], ["y"], name="same")]
    with pytest.raises(GraphError, match="two nodes are named 'same'"):
        tg.compile(_model(nodes, [("x", F, [5])], [("y", F)]))
    unnamed = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]
    _matches_ort(_model(unnamed, [("x", F, [5])], [("y", F)]), {"x": RNG.standard_normal(5).astype(np.float32)})


def test_two_nodes_defining_one_tensor_are_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    with pytest.raises(GraphError, match="'y' is defined twice"):
        tg.compile(_model(nodes, [("x", F, [4])], [("y", F)]))


@pytest.mark.parametrize("nodes", [
    [helper.make_node("Relu", ["ghost"], ["y"])],
    [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
     helper.make_node("Neg", ["b"], ["y"])],  # a cycle
], ids=["dangling", "cycle"])
def test_undefined_tensors_and_cycles_are_one_graph_error(nodes):
    with pytest.raises(GraphError, match="reads undefined tensors"):
        tg.compile(_model(nodes, [("x", F, [4])], [("y", F)]))


def test_integer_div_truncates_like_onnx_under_both_orchestrations():
    a = np.array([7, -7, 7, -7, 0, 9, -9, 1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4, 4, -1], np.int32)
    model = _model([helper.make_node("Div", ["a", "b"], ["y"])], [("a", I32, [8]), ("b", I32, [8])], [("y", I32)])
    _matches_ort(model, {"a": a, "b": b})


def test_an_empty_slice_gives_an_empty_output_under_both_orchestrations():
    """An empty Slice makes a zero-sized tensor: BLP once left its node out and reported success
    (the call then raised KeyError). Zero-sized tensors hold no values, so they are constants now
    (passes.empty_tensors_as_constants): both orchestrations give the empty output."""
    starts, ends = (helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array([v], np.int64)))
                    for n, v in (("s", 2), ("e", 2)))
    nodes = [starts, ends, helper.make_node("Slice", ["x", "s", "e"], ["z"]), helper.make_node("Relu", ["z"], ["y"])]
    model = _model(nodes, [("x", F, [4])], [("y", F)])
    for orchestration in ("blp", "greedy"):
        y = tg.compile(model, orchestration=orchestration).run({"x": np.ones(4, np.float32)})["y"]
        assert y.shape == (0,) and y.dtype == np.float32


def test_blp_raises_the_build_error_of_a_node_no_kernel_covers(monkeypatch):
    """BLP once left out a node whose kernels all failed to build, and reported success."""
    from tilegraph.graph import kernels

    original = kernels._build_one

    def failing(spec, target, schedule):
        if "act" in spec.nodes:
            raise GraphError("injected: the relu's kernels do not build")
        return original(spec, target, schedule)

    monkeypatch.setattr(kernels, "_build_one", failing)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="act")]
    model = _model(nodes, [("x", F, [3, 4])], [("y", F)], [("w", RNG.standard_normal((4, 5)).astype(np.float32))])
    for orchestration in ("blp", "greedy"):
        with pytest.raises(GraphError, match="injected"):
            tg.compile(model, orchestration=orchestration)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_out_of_range_gather_indices_are_refused_at_call_time(dtype):
    table = RNG.standard_normal((5, 4)).astype(np.float32)
    model = _model([helper.make_node("Gather", ["E", "ids"], ["y"])], [("ids", I64 if dtype == np.int64 else I32, [3])],
                   [("y", F)], [("E", table)])
    compiled = tg.compile(model)
    ok = np.array([1, -1, 4], dtype)  # negative indices count from the end, as in ONNX
    np.testing.assert_array_equal(compiled(ok)[0], table[ok])
    for bad in ([1, 100, 2], [0, -6, 1], [2**31 - 1, 0, 0]):
        with pytest.raises(IndexOutOfRange, match=f"input 'ids'.*index {bad[1] if bad[1] else bad[0]}"):
            compiled(np.array(bad, dtype))


def test_out_of_range_indices_computed_inside_the_model_are_refused():
    """GatherElements whose indices are computed (ids + 1) inside the model: checked after the
    kernel that writes them, never folded into the gather's kernel."""
    one = helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.int64)))
    nodes = [one, helper.make_node("Add", ["ids", "one"], ["shifted"]),
             helper.make_node("GatherElements", ["x", "shifted"], ["y"], axis=1)]
    model = _model(nodes, [("x", F, [2, 3]), ("ids", I64, [2, 3])], [("y", F)])
    compiled = tg.compile(model)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    ids = np.array([[0, 1, 0], [1, 0, -1]], np.int64)
    np.testing.assert_array_equal(compiled(x, ids)[0], np.take_along_axis(x, ids + 1, axis=1))
    with pytest.raises(IndexOutOfRange, match="tensor 'shifted'.*index 3"):
        compiled(x, np.array([[0, 1, 2], [0, 0, 0]], np.int64))


def test_constant_out_of_range_indices_are_refused_when_compiling():
    ids = helper.make_node("Constant", [], ["ids"], value=numpy_helper.from_array(np.array([0, 7], np.int64)))
    model = _model([ids, helper.make_node("Gather", ["x", "ids"], ["y"])], [("x", F, [5, 2])], [("y", F)])
    with pytest.raises(IndexOutOfRange, match="index 7"):
        tg.compile(model)


def test_nan_in_max_pool_and_reduce_max_propagates():
    """Our semantics, pinned: a NaN in a window or a reduction gives NaN (numpy, PyTorch, IEEE 754
    `maximum`). ONNX Runtime's result there depends on the NaN's position (docs/reliability.md)."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 1, 2] = np.nan
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("ReduceMax", ["x"], ["r"], keepdims=0)]
    model = tg.compile(_model(nodes, [("x", F, [1, 1, 4, 4])], [("p", F), ("r", F)]))
    pooled, reduced = model(x)
    assert np.isnan(pooled[0, 0, 0, 1]) and np.isnan(reduced).all()
    assert pooled[0, 0, 0, 0] == 5 and pooled[0, 0, 1, 1] == 15


@pytest.mark.parametrize("kwargs, message", [
    ({"num_threads": 0}, "num_threads must be a positive integer"),
    ({"db": 12345}, "db must be a database path"),
    ({"time_budget": float("nan")}, "finite number of seconds"),
    ({"time_budget": float("inf")}, "finite number of seconds"),
    ({"trials": 2.5}, "trials must be a non-negative integer"),
])
def test_bad_compile_arguments_are_one_graph_error(kwargs, message):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [4])], [("y", F)])
    with pytest.raises(GraphError, match=message):
        tg.compile(model, **kwargs)


@pytest.mark.parametrize("shapes, message", [
    ({"x": (2.7, 8)}, "expected non-negative integers"),
    ({"nope": (2, 8)}, "not graph inputs"),
    ({"x": (2, 9)}, "does not fit the declared shape"),
    ({"x": (2, 8, 1)}, "does not fit the declared shape"),
])
def test_bad_input_shapes_are_refused(shapes, message):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, ["N", 8])], [("y", F)])
    with pytest.raises(GraphError, match=message):
        tg.graph.from_onnx(model, input_shapes=shapes)
    graph = tg.graph.from_onnx(model, input_shapes={"x": (2, 8)})
    assert graph.type_of("x").shape == (2, 8)
    compiled = tg.compile(model, input_shapes={"x": (3, 8)})  # the same through tg.compile
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_array_equal(compiled(x)[0], np.maximum(x, 0))
    with pytest.raises(GraphError, match="dict of input name"):
        compiled.run([x])


def test_a_model_larger_than_memory_is_a_resource_error():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, [100000, 100000, 100])], [("y", F)])
    with pytest.raises(ResourceError, match="GiB"):
        tg.compile(model)


def test_a_huge_constant_of_shape_is_refused_not_allocated():
    shape = helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array([10**5, 10**5, 10],
                                                                                               np.int64)))
    nodes = [shape, helper.make_node("ConstantOfShape", ["shape"], ["c"]), helper.make_node("Add", ["x", "c"], ["y"])]
    with pytest.raises((ResourceError, GraphError)):
        tg.compile(_model(nodes, [("x", F, [1])], [("y", F)]))


@pytest.mark.parametrize("length", [400, 2000])
def test_a_long_chain_compiles_without_deep_recursion(length):
    nodes = [helper.make_node("Neg", [f"t{i}"], [f"t{i + 1}"]) for i in range(length)]
    nodes[0] = helper.make_node("Neg", ["x"], ["t1"])
    nodes.append(helper.make_node("Relu", [f"t{length}"], ["y"]))
    x = RNG.standard_normal(7).astype(np.float32)
    _matches_ort(_model(nodes, [("x", F, [7])], [("y", F)]), {"x": x})
