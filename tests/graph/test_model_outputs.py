"""A compiled model's outputs: written straight into arrays of their own where a kernel writes
them (graph/model.py's _FreshOutput), copied out of the arena otherwise. Either way a call hands
back arrays of its own: the next call never writes into them while the caller holds them, and
reuses their memory once it does not."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph import GraphBuilder, TensorType

pytestmark = pytest.mark.needs_cc


def _model():
    """x . W -> relu -> (r, r reshaped, -r, x . W2 with W2 2049 columns: padded, then sliced)."""
    rng = np.random.default_rng(0)
    weights, wide = rng.standard_normal((33, 40)).astype(np.float32), rng.standard_normal((33, 2049)).astype(np.float32)
    b = GraphBuilder()
    x = b.input("x", TensorType((5, 33), "float32"))
    r = b.add("relu", [b.add("matmul", [x, b.constant(weights, "w")])])
    flat = b.add("reshape", [r], {"shape": (200,)})
    n = b.add("neg", [r])
    logits = b.add("matmul", [x, b.constant(wide, "w_wide")])
    graph = b.build([r, flat, n, logits])

    def reference(a):
        relu = np.maximum(a.astype(np.float64) @ weights, 0)
        return [relu, relu.reshape(200), -relu, a.astype(np.float64) @ wide]

    return tg.compile(graph), graph, reference


def test_every_call_returns_arrays_of_its_own_with_the_right_values():
    model, graph, reference = _model()
    model._bind()
    fresh = {out.name for out in model._fresh}
    assert graph.outputs[2] in fresh and graph.outputs[3] in fresh  # the kernels write these two
    assert graph.outputs[0] not in fresh and graph.outputs[1] not in fresh  # one tensor, two outputs: copied
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((5, 33)).astype(np.float32) for _ in range(2))
    first = model.run({"x": a})
    kept = {k: v.copy() for k, v in first.items()}
    second = model.run({"x": b})
    for name, want in zip(graph.outputs, reference(a)):
        np.testing.assert_array_equal(first[name], kept[name])  # the second call wrote elsewhere
        np.testing.assert_allclose(first[name], want, rtol=1e-4, atol=1e-4)
    for name, want in zip(graph.outputs, reference(b)):
        np.testing.assert_allclose(second[name], want, rtol=1e-4, atol=1e-4)
        assert not np.shares_memory(second[name], first[name])
        assert not np.shares_memory(second[name], model._base)
        assert second[name].flags.c_contiguous and second[name].flags.writeable
        assert second[name].shape == graph.type_of(name).shape


def test_the_profiled_calls_write_the_new_arrays_too():
    model, graph, reference = _model()
    a = np.random.default_rng(2).standard_normal((5, 33)).astype(np.float32)
    prof = model.profile({"x": a}, seconds=0.05)
    assert prof.calls >= 1
    for name, want in zip(graph.outputs, reference(a)):
        np.testing.assert_allclose(model.run({"x": a})[name], want, rtol=1e-4, atol=1e-4)


def test_memory_of_a_dropped_result_is_written_again_a_held_one_never():
    model, graph, reference = _model()
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((5, 33)).astype(np.float32) for _ in range(4)]
    written = graph.outputs[3]  # a kernel writes it: no copy out of the arena
    held = model.run({"x": inputs[0]})[written]
    address = held.ctypes.data
    dropped = model.run({"x": inputs[1]})[written]
    assert dropped.ctypes.data != address
    dropped_address = dropped.ctypes.data
    del dropped
    again = model.run({"x": inputs[2]})[written]
    assert again.ctypes.data == dropped_address  # no new memory for a result nobody holds
    np.testing.assert_allclose(held, reference(inputs[0])[3], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(again, reference(inputs[2])[3], rtol=1e-4, atol=1e-4)
    column = held[:, 7]  # a view keeps the whole result's memory from being lent again
    del held
    newest = model.run({"x": inputs[3]})[written]
    assert newest.ctypes.data != address
    np.testing.assert_allclose(column, reference(inputs[0])[3][:, 7], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(newest, reference(inputs[3])[3], rtol=1e-4, atol=1e-4)
