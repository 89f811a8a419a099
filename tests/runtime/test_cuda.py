"""runtime/cuda.py: CudaKernel follows the kernel protocol; nvcc builds through build/ (runs need a GPU)."""

import shutil

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.runtime.launch import KernelProtocol

CUDA = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0", cc=shutil.which("nvcc") or "nvcc")


@pytest.mark.needs_nvcc
def test_a_cuda_kernel_is_built_through_the_cache_and_follows_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    try:
        kernel = tg.build(workloads.from_spec("softmax:4,33"), CUDA)
    except OSError as e:  # the CUDA runtime library cannot load on a machine without a driver
        pytest.skip(f"the CUDA runtime does not load here: {e}")
    assert isinstance(kernel, KernelProtocol) and kernel.target is CUDA
    assert str(kernel.lib_path).startswith(str(tmp_path / "build"))
    assert len(kernel.inputs) == 1 and len(kernel.outputs) == 1
    with pytest.raises(TypeError, match="1 input"):
        kernel.bind([], [np.zeros((4, 33), np.float32)])


@pytest.mark.needs_gpu
def test_a_cuda_kernel_runs_and_times(rng):
    kernel = tg.build(workloads.from_spec("softmax:4,33"), tg.Target("cuda"))
    x = rng.standard_normal((4, 33)).astype(np.float32)
    want = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(kernel(x), want / want.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert kernel.time(x, warmup=1, min_time=0.0, repeat=3).median > 0
