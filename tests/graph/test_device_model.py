"""Whole models on a GPU target (issue 18, part 5), run here on OpenCL (PoCL): tensors stay in one
device arena between kernels, the outputs match ONNX Runtime, whole-model tuning and BLP
orchestration work there, and a GPU model saves and loads; CUDA without a GPU is refused with one line."""

import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import ResourceError
from tilegraph.graph.device_model import DeviceModel
from tilegraph.runtime.device_memory import device_alignment

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = [pytest.mark.needs_opencl, pytest.mark.extended]
F = TensorProto.FLOAT


def _block_model(seed=0):
    """MatMul + bias + ReLU + MatMul + residual + LayerNorm + Softmax + Reshape (a view)."""
    rng = np.random.default_rng(seed)
    inits = {"w1": rng.standard_normal((64, 96)) * 0.1, "b1": rng.standard_normal(96), "w2": rng.standard_normal((96, 64)) * 0.1,
             "g": np.abs(rng.standard_normal(64)) + 0.5, "be": rng.standard_normal(64)}
    tensors = [numpy_helper.from_array(np.asarray(a, dtype=np.float32), n) for n, a in inits.items()]
    tensors.append(numpy_helper.from_array(np.array([2, 12, 64], dtype=np.int64), "shape"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["o"]),
             helper.make_node("Add", ["o", "x"], ["res"]),
             helper.make_node("LayerNormalization", ["res", "g", "be"], ["ln"], axis=-1, epsilon=1e-5),
             helper.make_node("Softmax", ["ln"], ["sm"], axis=-1), helper.make_node("Reshape", ["sm", "shape"], ["y"])]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", F, [24, 64])],
                              [helper.make_tensor_value_info("y", F, None)], tensors)
    # IR 9 (what opset 18 needs), so older ONNX Runtimes beside a newer onnx read it too
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.fixture(scope="module")
def block():
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import available

    if not available():
        pytest.skip("no OpenCL device")
    model = _block_model()
    return model, tg.compile(model, target="opencl")


def test_a_model_runs_on_opencl_with_tensors_in_device_memory(block):
    onnx_model, model = block
    assert isinstance(model, DeviceModel) and "device memory" in model.summary()
    session = ort.InferenceSession(onnx_model.SerializeToString())
    rng = np.random.default_rng(1)
    for _ in range(2):  # a second call reuses the arena with new inputs
        x = rng.standard_normal((24, 64)).astype(np.float32)
        np.testing.assert_allclose(model(x)[0], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    align = device_alignment(model.target)
    assert all(offset % align == 0 for offset in model.plan.offsets.values())
    assert [k.name for k in model.kernels] == [k.program.name for k in model.kernel_objects]


def test_only_inputs_go_up_and_only_outputs_come_down(block, monkeypatch):
    _, model = block
    x = np.ones((24, 64), np.float32)
    model(x)
    memory = model._memory
    counts = {"upload": 0, "download": 0, "launch": 0}
    for name in counts:
        original = getattr(memory, name)

        def counted(*args, _name=name, _original=original):
            counts[_name] += 1
            return _original(*args)

        monkeypatch.setattr(memory, name, counted)
    model(x)
    assert counts == {"upload": 1, "download": 1, "launch": len(model.steps)}


def test_a_gpu_model_is_profiled_step_by_step_on_the_device(block, monkeypatch):
    """model.profile on a device model: each step launched, then the device synchronized before the
    clock is read (launches are asynchronous: without it a step's time would be its launch's)."""
    onnx_model, model = block
    x = np.random.default_rng(2).standard_normal((24, 64)).astype(np.float32)
    model(x)
    memory, events = model._memory, []
    for name in ("synchronize", "launch"):
        original = getattr(memory, name)

        def logged(*args, _name=name, _original=original):
            events.append(_name)
            return _original(*args)
        monkeypatch.setattr(memory, name, logged)
    model._device_steps = model._prepare_steps(memory)  # bound again: their launches go through `logged`
    prof = model.profile({"x": x}, seconds=0.05)
    assert len(prof.steps) == len(model.steps) and prof.calls >= 5
    assert all(s.seconds > 0 for s in prof.steps) and prof.end_to_end_s > 0 and prof.peak_flops is None
    # every launch of an instrumented call is followed by a synchronization (a plain call, timed
    # between them, synchronizes once after all its launches)
    synchronized = sum(a == "launch" and b == "synchronize" for a, b in zip(events, events[1:]))
    assert len(model.steps) >= 3 and synchronized >= prof.calls * len(model.steps), events[:20]
    session = ort.InferenceSession(onnx_model.SerializeToString())
    np.testing.assert_allclose(model(x)[0], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_a_batch_1_fc_head_runs_as_a_matrix_vector_kernel(opencl_device):
    """ResNet-50's head at batch 1 (average pool, flatten, Gemm + bias, here with a ReLU): the Gemm's
    default GPU kernel puts K on a warp's lanes and an output on each warp (schedule/gpu_rows.py),
    with the bias and ReLU fused after the reduction; the model matches ONNX Runtime."""
    rng = np.random.default_rng(4)
    c, n = 192, 37
    tensors = [numpy_helper.from_array((rng.standard_normal((n, c)) * 0.1).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")]
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "fc_head", [helper.make_tensor_value_info("x", F, [1, c, 5, 5])],
                              [helper.make_tensor_value_info("y", F, None)], tensors)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    model = tg.compile(onnx_model, target="opencl", orchestration="greedy")
    (gemm,) = [k for k in model.kernel_objects if "matmul" in k.program.name]
    assert "_lane" in gemm.source and "barrier(" in gemm.source  # lanes combined through local memory
    session = ort.InferenceSession(onnx_model.SerializeToString())
    for seed in (5, 6):
        x = np.random.default_rng(seed).standard_normal((1, c, 5, 5)).astype(np.float32)
        np.testing.assert_allclose(model(x)[0], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_gpu_model_saves_and_loads_in_a_fresh_process(block, tmp_path):
    """The saved GPU model holds each program's source and launches; a fresh process loads it for
    the device (kernels rebuilt through the backend's loader) and it computes what ONNX Runtime does."""
    import subprocess
    import sys

    onnx_model, model = block
    path = model.save(tmp_path / "m.tg")
    sources = sorted(p.name for p in path.glob("data-*/kernels/*"))
    assert sources and all(name.endswith(".cl") for name in sources)
    x = np.random.default_rng(5).standard_normal((24, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = (f"import numpy as np, tilegraph as tg; m = tg.load({str(path)!r}, target='opencl'); "
              f"print(type(m).__name__); np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r}))[0])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DeviceModel" in done.stdout
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(tg.ModelFileError, match="this machine's target is"):
        tg.load(path)  # a GPU model asked for on the CPU target: one line naming both


def test_a_corrupted_gpu_kernel_source_is_refused(block, tmp_path):
    _, model = block
    path = model.save(tmp_path / "m.tg")
    source = next(path.glob("data-*/kernels/k0.cl"))
    source.write_text(source.read_text() + "\n// edited")
    with pytest.raises(tg.ModelFileError, match="does not match its recorded sha256"):
        tg.load(path, target="opencl")


def test_a_gpu_model_is_tuned_and_stays_correct(block, tmp_path):
    """Whole-model tuning on a GPU target: the task scheduler measures Gensor's GPU states on the
    device (each checked against the reference), the model is built from the records."""
    onnx_model, _ = block
    tuned = tg.compile(onnx_model, target="opencl", db=str(tmp_path / "t.db"), trials=8)
    report = tuned.tuning
    assert report is not None and report.measured == 8 and report.peak_gflops > 0
    assert any(row.after_s is not None for row in report.rows)
    x = np.random.default_rng(2).standard_normal((24, 64)).astype(np.float32)
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(tuned(x)[0], want, rtol=1e-5, atol=1e-6)
    loaded = tg.load(tuned.save(tmp_path / "tuned.tg"), target="opencl")  # the tuned kernels, saved
    assert isinstance(loaded, DeviceModel) and loaded.tuned == tuned.tuned
    np.testing.assert_allclose(loaded(x)[0], want, rtol=1e-5, atol=1e-6)


def test_blp_orchestration_measures_gpu_candidates_on_the_device(tmp_path, monkeypatch):
    """BLP on a GPU target: every candidate runs on the device in the measurement worker, checked
    against the graph's references, and is recorded; a second compile measures nothing."""
    from tilegraph.tune.database import built_kernels_fingerprint, open_database

    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))
    onnx_model = _block_model(seed=3)
    model = tg.compile(onnx_model, target="opencl")
    report = model.orchestration
    assert report is not None and report.measured > 0 and report.failed == 0
    x = np.random.default_rng(4).standard_normal((24, 64)).astype(np.float32)
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-5, atol=1e-6)
    fingerprint = built_kernels_fingerprint(str(model.target.fingerprint))
    records = [r for r in open_database(None).records() if r.target_fingerprint == fingerprint]
    assert len(records) == report.measured and all(r.ok for r in records)
    assert tg.compile(onnx_model, target="opencl").orchestration.measured == 0


def test_cuda_without_a_gpu_is_one_line(monkeypatch):
    from tilegraph.runtime import backends

    monkeypatch.setattr(backends, "gpu_visible", lambda: False)
    with pytest.raises(ResourceError, match="no NVIDIA GPU"):
        tg.compile(_block_model(), target="cuda")


def test_reduced_bert_on_opencl_matches_onnxruntime(exported, opencl_device):
    path = exported("bert", "dynamo")
    model = tg.compile(path, target="opencl")
    rng = np.random.default_rng(0)
    inputs = {n: rng.integers(0, 1000, model.graph.type_of(n).shape).astype(np.int64) for n in model.input_names}
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    got = model.run(inputs)
    for name, e in zip(model.output_names, expected):
        assert np.abs(got[name] - e).max() <= 1e-3 * np.abs(e).max()


def test_cli_runs_an_onnx_model_on_opencl(tmp_path, opencl_device, capsys):
    from tilegraph.cli.main import main

    path = tmp_path / "block.onnx"
    onnx.save(_block_model(), str(path))
    assert main(["run", str(path), "--target", "opencl", "--vs", "onnxruntime", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["onnxruntime_relative_error"] < 1e-5
    assert main(["run", str(path), "--target", "nonsense"]) == 2


def _graph_model():
    from tilegraph.graph.device_model import DeviceModel

    model = tg.compile(_block_model(), target="opencl")
    assert isinstance(model, DeviceModel)
    return model


def test_opencl_launches_kernel_by_kernel_and_says_why():
    model = _graph_model()
    x = np.random.default_rng(0).standard_normal((24, 64)).astype(np.float32)
    model(x)
    assert model.launch_mode == "kernels" and "opencl" in model.graph_note


def test_a_replay_is_kept_only_if_it_recomputes_the_outputs(monkeypatch):
    """The check behind CUDA graphs, with a stand-in capture on OpenCL: a replay that runs the steps
    is kept (and used); one that launches nothing leaves the poisoned outputs and is dropped."""
    x = np.random.default_rng(1).standard_normal((24, 64)).astype(np.float32)
    want = _graph_model()(x)[0]

    model = _graph_model()
    replays = []

    def capture(prepare_steps):
        steps = prepare_steps()

        def replay():
            replays.append(1)
            for step in steps:
                step()
        return replay

    memory = model._bind_device()
    monkeypatch.setattr(memory, "capture", capture)
    np.testing.assert_array_equal(model(x)[0], want)
    assert model.launch_mode == "graph" and replays == [1]
    np.testing.assert_array_equal(model(x * 1)[0], want)
    assert replays == [1, 1]
    model.device_graph = False
    np.testing.assert_array_equal(model(x)[0], want)
    assert replays == [1, 1] and model.launch_mode == "kernels"

    lazy = _graph_model()
    monkeypatch.setattr(lazy._bind_device(), "capture", lambda prepare_steps: (lambda: None))
    np.testing.assert_array_equal(lazy(x)[0], want)
    assert lazy.launch_mode == "kernels" and "differs" in lazy.graph_note
    np.testing.assert_array_equal(lazy(x)[0], want)

    broken = _graph_model()

    def fails(prepare_steps):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(broken._bind_device(), "capture", fails)
    np.testing.assert_array_equal(broken(x)[0], want)
    assert broken.launch_mode == "kernels" and "capture failed: RuntimeError" in broken.graph_note
