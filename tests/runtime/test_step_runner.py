"""The step runner: a compiled model's launches as one native call give the same results as the
launches one by one, stop where a check must run, and step aside where they cannot serve."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime.step_runner import MAX_POINTERS, StepRunner, step_runner

pytestmark = pytest.mark.needs_cc
onnx = pytest.importorskip("onnx")


def _chain(tmp_path, length: int = 9):
    """x -> (sigmoid, add w, tanh) repeated: `length` unfused launches of three kernels."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, prev = [], "x"
    for i in range(length):
        op = ("Sigmoid", "Add", "Tanh")[i % 3]
        inputs = [prev, "w"] if op == "Add" else [prev]
        nodes.append(helper.make_node(op, inputs, [f"y{i}"]))
        prev = f"y{i}"
    w = numpy_helper.from_array(np.linspace(-1, 1, 7 * 5).astype(np.float32).reshape(7, 5), "w")
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 5])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], [w])
    path = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_model_runs_its_launches_as_one_native_call_with_the_same_results(tmp_path):
    model = tg.compile(str(_chain(tmp_path)), fuse=False)
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    got = model(x)[0]
    assert model._runners is not None and len(model._runners) == 1
    (runner, last), = model._runners
    assert isinstance(runner, StepRunner) and last == len(model.steps) - 1 == 8
    want = x.astype(np.float64)
    w = np.linspace(-1, 1, 35).reshape(7, 5)
    for i in range(9):
        want = (1 / (1 + np.exp(-want)), want + w, np.tanh(want))[i % 3]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    model._runners = None  # the launches one by one: the same bits
    np.testing.assert_array_equal(model(x)[0], got)
    assert all(k.last_num_threads == model._bound_threads for k in model.kernel_objects)


def test_the_runner_stops_where_computed_indices_are_checked(tmp_path):
    """Indices computed inside the model are checked right after the kernel that writes them: the
    launches are cut there, and an index out of range is still an error before the gather runs."""
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Cast", ["r"], ["i"], to=TensorProto.INT64),
             helper.make_node("Gather", ["table", "i"], ["g"]), helper.make_node("Sigmoid", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [table])
    path = tmp_path / "gather.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    model = tg.compile(str(path), fuse=False)
    x = np.array([0, 1, 2, 3, 1], np.float32)
    np.testing.assert_allclose(model(x)[0], 1 / (1 + np.exp(-np.arange(12).reshape(4, 3)[[0, 1, 2, 3, 1]])),
                               rtol=1e-6)
    assert model._step_checks and len(model._runners) >= 2  # cut after the step that writes the indices
    from tilegraph.graph.index_checks import IndexOutOfRange

    with pytest.raises(IndexOutOfRange, match="index 9 is out of range"):
        model(np.array([0, 9, 2, 3, 1], np.float32))


class _Foreign:
    """A launch that is not a CPU kernel's ctypes call (an emulated or device launch)."""

    def run(self) -> None:
        pass


def test_launches_it_cannot_call_run_one_by_one():
    assert step_runner([]) is None
    assert step_runner([_Foreign()]) is None

    class Wide:
        function = object()
        arguments = [0] * (MAX_POINTERS + 1) + [1]

    assert step_runner([Wide()]) is None


def test_a_new_thread_setting_rebinds_the_runner(tmp_path):
    from tilegraph.runtime import threads

    model = tg.compile(str(_chain(tmp_path, 4)), fuse=False)
    x = np.ones((7, 5), np.float32)
    want = model(x)[0]
    try:
        threads.set_num_threads(1)
        np.testing.assert_array_equal(model(x)[0], want)
        (runner, _), = model._runners
        assert all(step.threads == 1 for step in runner._steps)
        assert all(k.last_num_threads == 1 for k in model.kernel_objects)
    finally:
        threads.reset_num_threads()
    model(x)
    assert all(step.threads == model.target.num_cores for step in model._runners[0][0]._steps)
