import os
import shutil

import numpy as np
import pytest

# Every graph pass's result is verified in the suite (graph/passes: a pass that breaks an invariant
# is named where it does, not by a later failure).
os.environ.setdefault("TILEGRAPH_VERIFY", "1")
# The suite never writes into the user's tuning database: compiles record their orchestration
# costs in the default database, here one per test session.
if "TILEGRAPH_DATA_DIR" not in os.environ:
    import atexit
    import tempfile

    os.environ["TILEGRAPH_DATA_DIR"] = tempfile.mkdtemp(prefix="tilegraph-test-data-")
    atexit.register(shutil.rmtree, os.environ["TILEGRAPH_DATA_DIR"], True)


def pytest_terminal_summary(terminalreporter):
    """The ONNX conformance count, when tests/graph/test_onnx_conformance.py ran."""
    import sys

    module = sys.modules.get("tests.graph.test_onnx_conformance")
    if module is None or not getattr(module, "OUTCOMES", None):
        return
    from benchmarks.onnx_conformance import opset_of, summary

    outcomes = list(module.OUTCOMES.values())
    opsets = {c.name: opset_of(c) for c in module.CASES if c.name in module.OUTCOMES}
    terminalreporter.write_line(summary(outcomes, opsets))


def pytest_collection_modifyitems(config, items):
    skip_cc = pytest.mark.skip(reason="no C compiler (gcc) on PATH")
    skip_nvcc = pytest.mark.skip(reason="nvcc not on PATH")
    skip_gpu = pytest.mark.skip(reason="no NVIDIA GPU")
    skip_qemu = pytest.mark.skip(reason="no aarch64 cross compiler or qemu-aarch64 (scripts/setup.sh installs them)")
    has_gpu = shutil.which("nvidia-smi") is not None
    has_qemu = shutil.which("qemu-aarch64") is not None and shutil.which("aarch64-linux-gnu-gcc") is not None
    for item in items:
        if "needs_cc" in item.keywords and shutil.which("gcc") is None:
            item.add_marker(skip_cc)
        if "needs_nvcc" in item.keywords and shutil.which("nvcc") is None:
            item.add_marker(skip_nvcc)
        if "needs_gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)
        if "needs_qemu" in item.keywords and not has_qemu:
            item.add_marker(skip_qemu)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def opencl_device() -> None:
    """Skips the test unless pyopencl imports and an OpenCL device (PoCL in CI) exists."""
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import available

    if not available():
        pytest.skip("no OpenCL device")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random schedule language model on disk (tests that need a model, not the shipped one's quality)."""
    pytest.importorskip("torch")
    from tilegraph.tune.tlm.network import ModelConfig, ScheduleLM, torch
    from tilegraph.tune.tlm.weights import save_model

    torch.manual_seed(0)
    net = ScheduleLM(ModelConfig(width=32, layers=1, heads=2, dropout=0.0))
    return save_model(net, {"trained": {"command": "tests: random tiny model", "seed": 0}},
                      tmp_path_factory.mktemp("tlm") / "tiny")
