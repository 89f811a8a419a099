"""precision="int8": the products of a float32 model with constant weights run on int8 weights and
dynamically quantized activations (passes/gemms_read_int8.py), behind the accuracy gate; against
ONNX Runtime's float32 result within int8's error, against the quantized graph's own reference
(the integers exact), saved and loaded, from the API and the CLI."""

import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph.compile import as_graph
from tilegraph.graph.passes.gemms_read_int8 import gemms_read_int8, quantize_weights
from tilegraph.graph.precision import random_inputs, relative_error
from tilegraph.graph.reference import run_reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tests.graph.test_precision import K, M, _mlp, _ort  # noqa: E402  (after the skips)


def _conv(tmp_path, channels, stride=1):
    """A 3x3 convolution (odd sizes, a bias) and a ReLU; NCHW, which the layout pass makes NHWC."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(channels)
    nodes = [helper.make_node("Conv", ["img", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], strides=[stride, stride]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, channels, 9, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((7, channels, 3, 3)).astype(np.float32) * 0.3, "cw"),
         numpy_helper.from_array(rng.standard_normal(7).astype(np.float32), "cb")])
    path = tmp_path / f"conv{channels}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


@pytest.fixture
def int8_everywhere(monkeypatch):
    """Compile int8 requests as int8 whatever this CPU is: without an int8 dot product the kernels
    sum the same integers with int32 multiply-adds (slower, the same numbers)."""
    import tilegraph.graph.compile as compile_module

    monkeypatch.setattr(compile_module, "has_int8_dot", lambda target: target.kind == "cpu")


def test_weights_are_quantized_per_output_channel_symmetrically():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((11, 5)).astype(np.float32)
    w[:, 2] = 0.0  # an all-zero channel: scale 1, not 0 / 0
    q, scale = quantize_weights(w, 1)
    assert q.dtype == np.int8 and scale.shape == (5,) and scale[2] == 1.0 and not q[:, 2].any()
    assert np.abs(q).max() == 127 and q.min() >= -127
    for column in (0, 1, 3, 4):
        assert np.abs(q[:, column]).max() == 127  # each channel's peak takes the whole range
    assert np.all(np.abs(q * scale - w) <= scale / 2 + 1e-7)
    exact = np.array([[0.5, 1.5, 127.0]], np.float32).T  # ties round to even, as ONNX's QuantizeLinear
    assert quantize_weights(exact, 1)[0].ravel().tolist() == [0, 2, 127]


def test_the_pass_quantizes_each_activation_once_and_leaves_the_rest_float(tmp_path):
    graph = as_graph(str(_mlp(tmp_path)), None, None)  # unoptimised: the two MatMuls are not merged
    fired: list[str] = []
    low = gemms_read_int8(graph, fired).verify()
    products = [n for n in low.nodes if n.op == "matmul"]
    assert len(products) == 2 and all(n.attr("accumulate") == "int32" for n in products)
    assert all(low.values[n.inputs[0]].dtype == "uint8" and low.values[n.inputs[1]].dtype == "int8"
               for n in products)
    assert sum(n.op == "reduce_max" for n in low.nodes) == 2  # x, read by both, is quantized once (two steps)
    assert low.values["y"].dtype == "float32" and len(fired) == 2
    assert gemms_read_int8(low) is low  # nothing left to quantize
    inputs = random_inputs(graph)
    error = relative_error(run_reference(low, inputs)["y"], run_reference(graph, inputs)["y"])
    assert 1e-4 < error < 3e-2


@pytest.mark.needs_cc
@pytest.mark.parametrize("make", [lambda p: _mlp(p), pytest.param(lambda p: _conv(p, 5), marks=pytest.mark.extended),
                                  lambda p: _conv(p, 3, stride=2)],
                         ids=["mlp", "conv5", "conv3-stride2"])
def test_int8_models_match_their_quantized_reference_and_onnx_runtime_within_int8_error(make, tmp_path,
                                                                                       int8_everywhere):
    path = make(tmp_path)
    model = tg.compile(str(path), precision="int8")
    assert model.precision == "int8" and model.precision_report.passed, model.precision_report.line()
    products = [n for n in model.graph.nodes if n.op in ("matmul", "conv2d")]
    assert products and all(n.attr("accumulate") == "int32" for n in products)
    rng = np.random.default_rng(7)  # fresh inputs, not the gate's
    feeds = {name: rng.standard_normal(model.graph.values[name].shape).astype(np.float32)
             for name in model.graph.inputs}
    got = model.run(feeds)["y"]
    # the compiled kernels against the interpreter's meaning of the quantized graph: the integer
    # products are exact; only a float32 division landing on a rounding tie may move one step
    assert relative_error(got, run_reference(model.graph, feeds)["y"]) < 2e-3
    error = relative_error(got, _ort(path, feeds))
    assert 1e-5 < error < 3e-2  # int8's rounding shows (it is not float32), and stays bounded


@pytest.mark.needs_cc
def test_an_all_zero_activation_gives_zeros_not_nan(tmp_path, int8_everywhere):
    model = tg.compile(str(_mlp(tmp_path)), precision="int8")
    zeros = {"x": np.zeros((M, K), np.float32)}
    want = _ort(_mlp(tmp_path), zeros)
    np.testing.assert_allclose(model.run(zeros)["y"], want, atol=1e-6)
    # the activation's scale is the smallest normal float, not 0 (x / 0 is NaN, and NaN cast to
    # uint8 is undefined in C)
    import dataclasses

    low = gemms_read_int8(as_graph(str(_mlp(tmp_path)), None, None))
    scale = next(n.outputs[0] for n in low.nodes if n.name.endswith("_q_scale"))
    values = run_reference(dataclasses.replace(low, outputs=(*low.outputs, scale)), zeros)
    assert values[scale] == np.finfo(np.float32).tiny


@pytest.mark.needs_cc
def test_an_int8_model_failing_the_gate_is_compiled_in_float32(tmp_path, int8_everywhere):
    path = _mlp(tmp_path)
    model = tg.compile(str(path), precision="int8", accuracy=1e-9)
    report = model.precision_report
    assert not report.passed and model.precision == "fp32" and "failed" in report.line()
    assert all(n.attr("accumulate", None) is None for n in model.graph.nodes)
    feeds = {"x": np.random.default_rng(3).standard_normal((M, K)).astype(np.float32)}
    assert relative_error(model.run(feeds)["y"], _ort(path, feeds)) < 1e-5
    unchecked = tg.compile(str(path), precision="int8", accuracy_check=False)
    assert unchecked.precision == "int8" and not unchecked.precision_report.checked


@pytest.mark.needs_cc
def test_a_target_without_an_int8_dot_product_compiles_int8_requests_in_float32(tmp_path, monkeypatch):
    import tilegraph.graph.compile as compile_module

    monkeypatch.setattr(compile_module, "has_int8_dot", lambda target: False)
    model = tg.compile(str(_mlp(tmp_path)), precision="int8")
    assert model.precision == "fp32" and not model.precision_report.passed
    assert "int8 dot product" in model.precision_report.line()
    assert all(n.attr("accumulate", None) is None for n in model.graph.nodes)


@pytest.mark.needs_cc
def test_an_int8_model_saves_and_loads_with_its_precision(tmp_path, int8_everywhere):
    model = tg.compile(str(_mlp(tmp_path)), precision="int8")
    feeds = {"x": np.random.default_rng(5).standard_normal((M, K)).astype(np.float32)}
    want = model.run(feeds)["y"]
    loaded = tg.load(model.save(tmp_path / "mlp.tg"))
    np.testing.assert_array_equal(loaded.run(feeds)["y"], want)
    assert loaded.precision == "int8"


@pytest.mark.needs_cc
def test_the_cli_compiles_in_int8_and_reports_the_gate(tmp_path, capsys, int8_everywhere):
    from tilegraph.cli.main import main

    path = _mlp(tmp_path)
    assert main(["compile", str(path), "-o", str(tmp_path / "m.tg"), "--precision", "int8", "--json"]) == 0
    described = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert described["precision"] == "int8" and described["accuracy_gate"]["passed"] is True
    assert "int8's default bound" in described["accuracy_gate"]["rule"]
    assert main(["run", str(tmp_path / "m.tg"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["precision"] == "int8"
