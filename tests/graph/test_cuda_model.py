"""A whole model on a real NVIDIA GPU (target cuda): untuned and tuned, against ONNX Runtime."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph.device_model import DeviceModel

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytestmark = pytest.mark.needs_gpu


def test_a_model_runs_and_tunes_on_the_gpu(tmp_path):
    from tests.graph.test_device_model import _block_model

    onnx_model = _block_model()
    session = ort.InferenceSession(onnx_model.SerializeToString())
    x = np.random.default_rng(3).standard_normal((24, 64)).astype(np.float32)
    want = session.run(None, {"x": x})[0]
    model = tg.compile(onnx_model, target="cuda")
    assert isinstance(model, DeviceModel)
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-5, atol=1e-6)
    tuned = tg.compile(onnx_model, target="cuda", db=str(tmp_path / "t.db"), trials=12)
    assert tuned.tuning is not None and tuned.tuning.measured > 0
    np.testing.assert_allclose(tuned(x)[0], want, rtol=1e-5, atol=1e-6)


def test_a_cuda_model_replays_its_launches_as_one_graph():
    """After the first call (kernel by kernel) a CUDA model records its launches as one CUDA graph,
    checked bit for bit against that call; replays give the launches' outputs for fresh inputs too."""
    from tests.graph.test_device_model import _block_model

    onnx_model = _block_model(seed=5)
    session = ort.InferenceSession(onnx_model.SerializeToString())
    model = tg.compile(onnx_model, target="cuda")
    rng = np.random.default_rng(8)
    first = rng.standard_normal((24, 64)).astype(np.float32)
    np.testing.assert_allclose(model(first)[0], session.run(None, {"x": first})[0], rtol=1e-5, atol=1e-6)
    assert model.launch_mode == "graph", model.graph_note
    for _ in range(3):
        x = rng.standard_normal((24, 64)).astype(np.float32)
        graphed = model(x)[0]
        model.device_graph = False
        launched = model(x)[0]
        model.device_graph = True
        np.testing.assert_array_equal(graphed, launched)
        np.testing.assert_allclose(graphed, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
