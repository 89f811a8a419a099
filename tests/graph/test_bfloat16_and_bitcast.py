"""bfloat16 at the graph boundary (computed in float32 over the bits, rounded once per operator to
nearest even, NaN kept) and BitCast (an alias of the input's bytes, no kernel), under both
orchestrations, against numpy (ml_dtypes) on fresh random inputs."""

import numpy as np
import pytest

import tilegraph as tg

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(23)


def _model(nodes, inputs, outputs, inits=(), opset=22):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                              [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _round_to_bf16(x32: np.ndarray) -> np.ndarray:
    return x32.astype(np.float32).astype(BF16)  # ml_dtypes rounds to nearest even


@pytest.mark.needs_cc
@pytest.mark.parametrize("orchestration", ["greedy", "blp"])
def test_cast_to_bfloat16_rounds_to_nearest_even_and_keeps_specials(orchestration):
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)], [("x", TensorProto.FLOAT, [12])],
                   [("y", TensorProto.BFLOAT16)])
    bits = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x3F807FFF, 0x7F7FFFFF, 0xFF800000, 0x7FC00001, 0x80000000,
                     0x00000001, 0x3F800000, 0x477FE000, 0xBF808001], np.uint32)  # ties to even, overflow, specials
    x = bits.view(np.float32)
    y = tg.compile(model, orchestration=orchestration).run({"x": x})["y"]
    assert y.dtype == BF16
    want = _round_to_bf16(x)
    np.testing.assert_array_equal(np.isnan(y.astype(np.float32)), np.isnan(want.astype(np.float32)))
    finite = ~np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(y.view(np.uint16)[finite], want.view(np.uint16)[finite])


@pytest.mark.needs_cc
def test_an_operator_on_bfloat16_rounds_once():
    """Softmax(x * w) with bfloat16 in and out: float32 inside each operator, one rounding per operator."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    w = (RNG.standard_normal(7) * 3).astype(np.float32).astype(BF16)
    model = _model(nodes, [("x", TensorProto.BFLOAT16, [5, 7])], [("y", TensorProto.BFLOAT16)], inits=[("w", w)])
    x = RNG.standard_normal((5, 7)).astype(np.float32).astype(BF16)
    y = tg.compile(model).run({"x": x})["y"]
    m = _round_to_bf16(x.astype(np.float32) * w.astype(np.float32)).astype(np.float64)
    e = np.exp(m - m.max(axis=-1, keepdims=True))
    want = _round_to_bf16((e / e.sum(axis=-1, keepdims=True)).astype(np.float32))
    ulp = np.abs(y.astype(np.float32) - want.astype(np.float32)) / np.spacing(want.astype(np.float32)) / 2 ** 16
    assert ulp.max() <= 1  # float32 rounding inside may move a result by one bfloat16 ulp, never more


@pytest.mark.needs_cc
@pytest.mark.parametrize("orchestration", ["greedy", "blp"])
def test_bitcast_is_the_bytes_under_another_type_between_kernels(orchestration):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("BitCast", ["r"], ["bits"], to=TensorProto.INT32),
             helper.make_node("Add", ["bits", "one"], ["next"]),
             helper.make_node("BitCast", ["next"], ["y"], to=TensorProto.FLOAT)]
    model = _model(nodes, [("x", TensorProto.FLOAT, [3, 5])], [("y", TensorProto.FLOAT), ("bits", TensorProto.INT32)],
                   inits=[("one", np.array(1, np.int32))], opset=26)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    out = tg.compile(model, orchestration=orchestration).run({"x": x})
    r = np.maximum(x, 0)
    np.testing.assert_array_equal(out["bits"], r.view(np.int32))
    np.testing.assert_array_equal(out["y"], (r.view(np.int32) + 1).view(np.float32))
