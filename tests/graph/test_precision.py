"""precision="bf16": the products of a float32 model read bfloat16 and accumulate in float32
(passes/gemms_read_bfloat16.py), behind the accuracy gate (graph/precision.py); against ONNX
Runtime's float32 result within bfloat16's error, saved and loaded, from the API and the CLI."""

import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError
from tilegraph.graph.compile import as_graph
from tilegraph.graph.passes.gemms_read_bfloat16 import gemms_read_bfloat16
from tilegraph.graph.precision import random_inputs, relative_error
from tilegraph.graph.reference import run_reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")

# odd sizes: K and the columns are no multiple of a vector, the batch is 1
M, K, N, C = 13, 37, 50, 6


def test_the_pass_converts_each_operand_once_and_leaves_the_rest_float(tmp_path):
    graph = as_graph(str(_mlp(tmp_path)), None, None)  # unoptimised: the two MatMuls are not merged
    fired: list[str] = []
    low = gemms_read_bfloat16(graph, fired).verify()
    products = [n for n in low.nodes if n.op in ("matmul", "conv2d")]
    assert products and all(n.attr("accumulate") == "float32" for n in products)
    assert all(low.values[t].dtype == "bfloat16" for n in products for t in n.inputs[:2])
    assert all(low.values[n.outputs[0]].dtype == "float32" for n in products)
    casts = [n for n in low.nodes if n.op == "cast"]
    assert len(casts) == 1  # the input both MatMuls read is converted once; the weights at compile time
    assert sum(a.dtype == ml_dtypes.bfloat16 for a in low.constants.values()) == 2
    assert len(fired) == 2
    assert gemms_read_bfloat16(low) is low  # nothing left to convert
    inputs = random_inputs(graph)
    want, got = run_reference(graph, inputs), run_reference(low, inputs)
    assert 0 < relative_error(got["y"], want["y"]) < 2e-2


def _mlp(tmp_path):
    """x @ w -> Softmax, x @ v, added: two products sharing their input, odd sizes."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["s"], axis=-1),
             helper.make_node("MatMul", ["x", "v"], ["g"]), helper.make_node("Add", ["s", "g"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "v")])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def _conv(tmp_path):
    """A 3x3 convolution with a bias (NCHW: the layout pass makes it NHWC) and a ReLU."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["img", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 5, 9, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((C, 5, 3, 3)).astype(np.float32) * 0.3, "cw"),
         numpy_helper.from_array(rng.standard_normal(C).astype(np.float32), "cb")])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


@pytest.fixture
def bf16_everywhere(monkeypatch):
    """Compile bf16 requests as bf16 whatever this CPU is: where it lacks AVX512_BF16 the kernels
    widen bfloat16 and run float32 FMAs (slower, the same numbers), so the numerics are tested on
    every machine (the lowering still pairs products only where the instruction exists), the odd
    shapes too where a matrix unit would keep products that do not fit its tiles float32."""
    import tilegraph.graph.compile as compile_module

    monkeypatch.setattr(compile_module, "has_bf16_dot", lambda target: target.kind == "cpu")
    monkeypatch.setattr(compile_module, "has_matrix_tiles", lambda target, kind: False)


def _ort(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.needs_cc
@pytest.mark.parametrize("make", [_mlp, _conv])
def test_bf16_models_match_onnx_runtime_within_bfloat16_error(make, tmp_path, bf16_everywhere):
    path = make(tmp_path)
    model = tg.compile(str(path), precision="bf16")
    assert model.precision == "bf16" and model.precision_report.passed, model.precision_report.line()
    assert "bf16" in model.summary()
    assert any(model.graph.values[n.inputs[0]].dtype == "bfloat16" for n in model.graph.nodes
               if n.op in ("matmul", "conv2d"))
    rng = np.random.default_rng(7)  # fresh inputs, not the gate's
    feeds = {name: rng.standard_normal(model.graph.values[name].shape).astype(np.float32)
             for name in model.graph.inputs}
    want = _ort(path, feeds)
    got = model.run(feeds)["y"]
    error = relative_error(got, want)
    assert 1e-6 < error < 2e-2  # bfloat16's rounding shows (it is not float32), and stays bounded
    fp32 = tg.compile(str(path)).run(feeds)["y"]
    assert relative_error(fp32, want) < 1e-5


@pytest.mark.needs_cc
def test_a_model_failing_the_gate_is_compiled_in_float32(tmp_path, bf16_everywhere):
    path = _mlp(tmp_path)
    model = tg.compile(str(path), precision="bf16", accuracy=1e-9)
    report = model.precision_report
    assert not report.passed and model.precision == "fp32" and report.precision == "fp32"
    assert "failed" in report.line() and report.error > 1e-9
    assert all(model.graph.values[t].dtype != "bfloat16" for t in model.graph.values)
    feeds = {"x": np.random.default_rng(3).standard_normal((M, K)).astype(np.float32)}
    assert relative_error(model.run(feeds)["y"], _ort(path, feeds)) < 1e-5
    unchecked = tg.compile(str(path), precision="bf16", accuracy_check=False)
    assert unchecked.precision == "bf16" and not unchecked.precision_report.checked


@pytest.mark.needs_cc
def test_with_a_matrix_unit_only_products_that_fit_its_tiles_read_bfloat16(tmp_path):
    """Where a CPU multiplies bfloat16 on its matrix unit (AMX), a product whose shapes fit no tile
    (13 x 37 . 37 x 50: columns no multiple of 16, K odd) stays float32, one that fits converts."""
    graph = as_graph(str(_mlp(tmp_path)), None, None)
    assert gemms_read_bfloat16(graph, tiles_only=True) is graph
    fits = as_graph(str(_transposed_product(tmp_path, transposed=False)), None, None)
    low = gemms_read_bfloat16(fits, tiles_only=True)
    assert [n.attr("accumulate") for n in low.nodes if n.op == "matmul"] == ["float32"]


@pytest.mark.needs_cc
def test_a_target_without_a_bf16_dot_product_compiles_bf16_requests_in_float32(tmp_path, monkeypatch):
    import tilegraph.graph.compile as compile_module

    monkeypatch.setattr(compile_module, "has_bf16_dot", lambda target: False)
    model = tg.compile(str(_mlp(tmp_path)), precision="bf16")
    assert model.precision == "fp32" and not model.precision_report.passed
    assert "without AVX512_BF16" in model.precision_report.line()
    assert all(model.graph.values[t].dtype != "bfloat16" for t in model.graph.values)


@pytest.mark.parametrize("options, match", [({"precision": "fp8"}, "unknown precision"),
                                            ({"precision": "bf16", "accuracy": 0.0}, "accuracy"),
                                            ({"precision": "bf16", "accuracy": float("nan")}, "accuracy"),
                                            ({"precision": "bf16", "target": "opencl"}, "CPU targets")])
def test_bad_precision_options_are_refused(options, match, tmp_path):
    with pytest.raises(GraphError, match=match):
        tg.compile(str(_mlp(tmp_path)), **options)


@pytest.mark.needs_cc
def test_a_bf16_model_saves_and_loads(tmp_path, bf16_everywhere):
    path = _mlp(tmp_path)
    model = tg.compile(str(path), precision="bf16")
    feeds = {"x": np.random.default_rng(5).standard_normal((M, K)).astype(np.float32)}
    want = model.run(feeds)["y"]
    loaded = tg.load(model.save(tmp_path / "mlp.tg"))
    np.testing.assert_array_equal(loaded.run(feeds)["y"], want)
    assert loaded.precision == "bf16"


@pytest.mark.needs_cc
def test_the_cli_compiles_in_bf16_and_reports_the_gate(tmp_path, capsys, bf16_everywhere):
    from tilegraph.cli.main import main

    path = _mlp(tmp_path)
    assert main(["compile", str(path), "-o", str(tmp_path / "m.tg"), "--precision", "bf16", "--json"]) == 0
    described = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert described["precision"] == "bf16" and described["accuracy_gate"]["passed"] is True
    assert main(["compile", str(path), "--precision", "bf16", "--accuracy", "0"]) == 2
    assert "--accuracy" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "m.tg"), "--precision", "bf16"]) == 2  # a saved model's is fixed
    assert "saved model's precision" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "m.tg"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["precision"] == "bf16"


def _transposed_product(tmp_path, transposed=True):
    """Transpose(x) @ w: the product's A is a prologue (a transpose and the cast to bfloat16),
    which a matrix unit's tile product cannot read in place; or x @ w."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]), helper.make_node("MatMul", ["xt", "w"], ["y"])]
    if not transposed:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "tp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 64] if transposed else [64, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((128, 96)).astype(np.float32), "w")])
    path = tmp_path / "tp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


@pytest.mark.needs_cc
@pytest.mark.parametrize("transposed", [False, True])
def test_bf16_products_run_on_the_matrix_unit_where_the_cpu_has_one(transposed, tmp_path):
    """On a CPU with AMX every product of these models computes its register tiles as tile products,
    a transposed operand materialised per task first (graph/fusion/compose.py), and the model
    matches ONNX Runtime within bfloat16's error."""
    from tilegraph.target import has_matrix_tiles

    if not has_matrix_tiles(tg.Target("cpu"), "bfloat16"):
        pytest.skip("this machine has no AMX for bfloat16")
    path = _transposed_product(tmp_path, transposed)
    model = tg.compile(str(path), precision="bf16")
    assert model.precision == "bf16"
    sources = [k.source for k in model.kernel_objects]
    products = [n for n in model.graph.nodes if n.op == "matmul"]
    assert sum("_tile_dpbf16ps(" in s for s in sources) >= len(products) > 0
    rng = np.random.default_rng(8)
    feeds = {name: rng.standard_normal(model.graph.values[name].shape).astype(np.float32)
             for name in model.graph.inputs}
    assert relative_error(model.run(feeds)["y"], _ort(path, feeds)) < 2e-2
