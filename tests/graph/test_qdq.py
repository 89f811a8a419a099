"""QDQ models as onnxruntime.quantization.quantize_static writes them: convolutions and GEMMs whose
activation and constant weights are dequantized run on the 8-bit integers (frontends/onnx_qdq.py:
uint8 x int8 products summed in int32, the zero point's compensation a constant per channel, the
padded border reading the zero point); the model matches ONNX Runtime on the same file, with
int8 and uint8 activations, and what cannot run on the integers keeps the dequantized floats."""

import numpy as np
import pytest

import tilegraph as tg

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto, helper  # noqa: E402

pytestmark = pytest.mark.needs_cc
IMAGE = (1, 3, 11, 9)  # odd extents: vector tails, padded borders on every side


@pytest.fixture(autouse=True)
def _integer_products_on_any_cpu():
    """The integer kernels wherever the suite runs (compile takes them only where the target has an
    int8 dot product; elsewhere the same IR runs as int32 multiply-adds, as tested here)."""
    from tilegraph.graph.frontends import onnx_qdq

    token = onnx_qdq.INTEGER_PRODUCTS.set(True)
    yield
    onnx_qdq.INTEGER_PRODUCTS.reset(token)


def _float_model(path, rng) -> None:
    """conv 3x3 pad 1 -> relu -> conv 3x3 stride 2 pad 1 -> relu -> flatten -> Gemm (transB) -> MatMul."""
    def const(name, shape, scale=0.3):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * scale).ravel())

    flat = 12 * 6 * 5
    inits = [const("w1", (8, 3, 3, 3)), const("b1", (8,), 0.1), const("w2", (12, 8, 3, 3)), const("b2", (12,), 0.1),
             const("w3", (21, flat), 0.05), const("b3", (21,), 0.1), const("w4", (21, 7)),
             helper.make_tensor("shape", TensorProto.INT64, (2,), (1, flat))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Reshape", ["r2", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["g"], transB=1),
             helper.make_node("MatMul", ["g", "w4"], ["y"])]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, IMAGE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 7))], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self):
        self.items = iter([{"x": np.random.default_rng(i).standard_normal(IMAGE).astype(np.float32)}
                           for i in range(8)])

    def get_next(self):
        return next(self.items, None)


def _quantized(tmp_path, rng, activation: str = "QInt8", weight: str = "QInt8") -> str:
    # reduce_range (7-bit weights) everywhere here: ONNX Runtime's u8 x s8 kernels on CPUs without
    # VNNI (AVX2, AVX-512F) sum pairs of products in int16 (vpmaddubsw) and saturate on full-range
    # weights, so its output, the reference, is off by up to 7% there (seen on an AVX2 Zen 3);
    # our integer sums are exact either way
    source, out = str(tmp_path / "float.onnx"), str(tmp_path / f"qdq_{activation}_{weight}.onnx")
    _float_model(source, rng)
    quantization.quantize_static(source, out, _Calibration(), quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=True, reduce_range=True, activation_type=getattr(quantization.QuantType, activation),
                                 weight_type=getattr(quantization.QuantType, weight))
    return out


def _against_onnxruntime(path: str) -> tuple[object, float]:
    model = tg.compile(path, orchestration="greedy")  # the fusion BLP is not what is tested here
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for seed in range(3):
        x = np.random.default_rng(100 + seed).standard_normal(IMAGE).astype(np.float32)
        want = session.run(None, {"x": x})[0]
        got = model.run({"x": x})["y"]
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
    return model, worst


def _integer_products(model) -> list:
    return [n for n in model.graph.nodes if n.op in ("conv2d", "matmul") and n.attr("accumulate", None) == "int32"]


@pytest.mark.parametrize("activation", ["QInt8", "QUInt8"])
def test_a_qdq_model_runs_its_products_on_the_integers_and_matches_onnxruntime(tmp_path, rng, activation):
    model, error = _against_onnxruntime(_quantized(tmp_path, rng, activation))
    products = _integer_products(model)
    assert len(products) == 4  # both convolutions, the Gemm and the MatMul
    assert all(model.graph.values[n.inputs[0]].dtype == "uint8" for n in products)
    assert all(model.graph.values[n.inputs[1]].dtype == "int8" for n in products)
    # the layout pass's transposes cancel through the quantize chains (identities included): only
    # the image's NCHW -> NHWC and the way back before the flatten are left
    assert sum(n.op == "transpose" for n in model.graph.nodes) == 2
    # the same integers and the same rounding rules: equal but where a float rounding lands on a
    # requantization tie (one quantization step of the output, a few percent of its range at most)
    assert error < 0.05


def test_a_saved_qdq_model_loads_with_its_integer_kernels(tmp_path, rng):
    path = _quantized(tmp_path, rng)
    model = tg.compile(path, orchestration="greedy")
    model.save(tmp_path / "saved")
    loaded = tg.load(tmp_path / "saved")
    assert len(_integer_products(loaded)) == 4
    assert loaded.precision == model.precision == "fp32"  # int32 products of its own, not a bf16 compile
    x = np.random.default_rng(3).standard_normal(IMAGE).astype(np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], model.run({"x": x})["y"])


def test_a_target_without_an_int8_dot_product_keeps_the_dequantized_floats(tmp_path, rng, monkeypatch):
    """On a target without an int8 dot-product step (an ARM CPU, an AVX-512 one without VNNI) the
    int32 multiply-adds cost more than float32 products: compile keeps the dequantized floats there
    (and the model still matches). The host's own target, told it has none: the test runs on any CPU."""
    from tilegraph.graph import compile as compile_module
    from tilegraph.graph.frontends import onnx_qdq

    monkeypatch.setattr(compile_module, "int8_dot_lanes", lambda target: 0)
    path = _quantized(tmp_path, rng)
    token = onnx_qdq.INTEGER_PRODUCTS.set(None)  # as a user's compile: decided by the target
    try:
        model, error = _against_onnxruntime(path)
    finally:
        onnx_qdq.INTEGER_PRODUCTS.reset(token)
    assert not _integer_products(model)
    assert error < 0.05


def test_an_avx2_target_runs_the_products_on_the_integers(tmp_path, rng):
    """AVX2's vpmaddwd step (weights packed in its pairs) makes the integers pay there: a user's
    compile for an AVX2 target takes them, packed in pairs, and the model still matches."""
    from tilegraph.graph.frontends import onnx_qdq

    host = tg.Target("cpu")
    if host.arch != "x86_64" or host.isa not in ("avx2", "avx512"):
        pytest.skip("AVX2 code runs on x86 CPUs with AVX2")
    path = _quantized(tmp_path, rng)
    token = onnx_qdq.INTEGER_PRODUCTS.set(None)  # as a user's compile: decided by the target
    try:
        model = tg.compile(path, target="cpu -isa=avx2", orchestration="greedy")
    finally:
        onnx_qdq.INTEGER_PRODUCTS.reset(token)
    assert len(_integer_products(model)) == 4
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(7).standard_normal(IMAGE).astype(np.float32)
    want = session.run(None, {"x": x})[0]
    assert float(np.abs(model.run({"x": x})["y"] - want).max() / np.abs(want).max()) < 0.05


def test_weights_with_zero_points_keep_the_dequantized_floats(tmp_path, rng):
    """uint8 weights (asymmetric: a zero point per channel) are not the u8 x s8 products: the
    convolutions and GEMMs stay float, and the model still matches."""
    model, error = _against_onnxruntime(_quantized(tmp_path, rng, "QUInt8", "QUInt8"))
    assert not _integer_products(model)
    assert error < 0.05


def _attention_model(path, rng) -> None:
    """Q, K, V projections, two heads, softmax(Q K^T) V: products of two activations."""
    s, d, heads = 13, 16, 2

    def const(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * 0.3).ravel())

    inits = [const("wq", (d, d)), const("wk", (d, d)), const("wv", (d, d)),
             helper.make_tensor("heads", TensorProto.INT64, (4,), (1, s, heads, d // heads))]
    nodes = [helper.make_node("MatMul", ["x", f"w{t}"], [t]) for t in "qkv"]
    nodes += [helper.make_node("Reshape", [t, "heads"], [f"{t}4"]) for t in "qkv"]
    nodes += [helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qt", "kt"], ["scores"]), helper.make_node("Softmax", ["scores"], ["p"]),
              helper.make_node("MatMul", ["p", "vt"], ["y"])]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, s, d))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, heads, s, d // heads))], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("activation", ["QInt8", "QUInt8"])
def test_products_of_two_activations_run_on_the_integers(tmp_path, rng, activation):
    """Attention's Q K^T and P V: both operands dequantized activations; the zero points' shares
    come from row and column sums reduced at run time. The integer products give what the
    dequantized float products give (exact sums against float32 ones: equal but where a float32
    rounding lands on a requantization tie; the softmax between them rounds differently from ONNX
    Runtime's by one quantum in places)."""
    from tilegraph.graph.frontends import onnx_qdq

    source, out = str(tmp_path / "attention.onnx"), str(tmp_path / "attention_qdq.onnx")
    _attention_model(source, rng)
    feeds = [{"x": np.random.default_rng(i).standard_normal((1, 13, 16)).astype(np.float32)} for i in range(8)]

    class Calibration(quantization.CalibrationDataReader):
        def __init__(self):
            self.items = iter(feeds)

        def get_next(self):
            return next(self.items, None)

    quantization.quantize_static(source, out, Calibration(), quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=True, reduce_range=True,
                                 activation_type=getattr(quantization.QuantType, activation))
    model = tg.compile(out, orchestration="greedy")
    assert all(n.attr("accumulate", None) == "int32" for n in model.graph.nodes if n.op == "matmul")
    assert sum(n.op == "matmul" for n in model.graph.nodes) == 3  # Q, K, V merged; the two attention products
    real = onnx_qdq._activation_product
    try:
        onnx_qdq._activation_product = lambda *args: None
        floats = tg.compile(out, orchestration="greedy")
    finally:
        onnx_qdq._activation_product = real
    x = np.random.default_rng(99).standard_normal((1, 13, 16)).astype(np.float32)
    got, float_path = model.run({"x": x})["y"], floats.run({"x": x})["y"]
    assert (got == float_path).mean() > 0.95 and np.abs(got - float_path).max() <= 0.05 * np.abs(got).max()
    want = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max()


def _conv_matmul_model(path, rng) -> None:
    """conv 3x3 pad 1 -> relu -> conv 3x3 stride 2 -> relu -> flatten -> MatMul (no Gemm: the
    QOperator format writes Gemm as com.microsoft's QGemm)."""
    def const(name, shape, scale=0.3):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * scale).ravel())

    flat = 12 * 5 * 4
    inits = [const("w1", (8, 3, 3, 3)), const("b1", (8,), 0.1), const("w2", (12, 8, 3, 3)), const("b2", (12,), 0.1),
             const("w3", (flat, 7), 0.05), helper.make_tensor("shape", TensorProto.INT64, (2,), (1, flat))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Reshape", ["r2", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "w3"], ["y"])]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, IMAGE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 7))], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("activation", ["QInt8", "QUInt8"])
def test_qoperator_models_run_qlinear_conv_and_matmul_on_the_integers(tmp_path, rng, activation):
    """quantize_static's QOperator format: QLinearConv and QLinearMatMul, read as dequantize ->
    product -> quantize, run on the u8 x s8 kernels and match ONNX Runtime on the same file."""
    source, out = str(tmp_path / "float.onnx"), str(tmp_path / "qop.onnx")
    _conv_matmul_model(source, rng)
    quantization.quantize_static(source, out, _Calibration(), quant_format=quantization.QuantFormat.QOperator,
                                 per_channel=True, reduce_range=True, activation_type=getattr(quantization.QuantType, activation),
                                 weight_type=quantization.QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(out).graph.node}
    assert {"QLinearConv", "QLinearMatMul"} <= ops
    model, error = _against_onnxruntime(out)
    assert len(_integer_products(model)) == 3
    assert not any(model.graph.values[t].dtype == "float64" for n in model.graph.nodes for t in n.outputs)
    assert error < 0.05  # one requantization step at a float rounding tie, at most


def _two_matmuls(path, rng) -> None:
    def const(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * 0.3).ravel())

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 13, 16))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 13, 5))],
                              [const("w1", (16, 24)), const("w2", (24, 5))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_dynamically_quantized_matmuls_run_on_the_integers(tmp_path, rng):
    """quantize_dynamic's DynamicQuantizeLinear -> MatMulInteger (the activation's zero point
    computed at run time) on the u8 x s8 kernels: the same integers, the same int32 sums, so the
    model gives ONNX Runtime's output to float32 rounding."""
    source, out = str(tmp_path / "float.onnx"), str(tmp_path / "dynamic.onnx")
    _two_matmuls(source, rng)
    quantization.quantize_dynamic(source, out, weight_type=quantization.QuantType.QInt8, reduce_range=True)
    assert "MatMulInteger" in {n.op_type for n in onnx.load(out).graph.node}
    model = tg.compile(out, orchestration="greedy")
    assert len(_integer_products(model)) == 2
    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 13, 16)).astype(np.float32)
        want = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(model.run({"x": x})["y"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
