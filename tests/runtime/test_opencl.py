import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads

pytest.importorskip("pyopencl")
from tilegraph.runtime.opencl import OpenCLKernel, available, device_limits  # noqa: E402

pytestmark = [pytest.mark.needs_opencl,
              pytest.mark.skipif(not available(), reason="no OpenCL device")]


@pytest.fixture(scope="module")
def kernel():
    wl = workloads.from_spec("matmul:8,4,8")
    sch = tg.Schedule(wl)
    i, j, _ = sch.loops("matmul")
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    return tg.build(sch, target="opencl")


def test_build_returns_an_opencl_kernel(kernel, rng):
    assert isinstance(kernel, OpenCLKernel)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_wrong_arguments_are_refused(kernel):
    a = np.zeros((8, 4), np.float32)
    with pytest.raises(TypeError, match="2 input arrays, got 1"):
        kernel(a)
    with pytest.raises(TypeError, match="input 'b' has dtype float64"):
        kernel(a, np.zeros((4, 8), np.float64))
    with pytest.raises(ValueError, match="input 'b': expected 32 contiguous"):
        kernel(a, np.zeros((4, 9), np.float32))


def test_time_is_positive(kernel):
    a = np.zeros((8, 4), np.float32)
    b = np.zeros((4, 8), np.float32)
    assert kernel.time(a, b, warmup=1, min_time=0.0, repeat=3).median > 0


def test_device_limits_are_reported():
    limits = device_limits()
    assert limits["max_threads_per_block"] >= 1 and limits["shared_memory_bytes"] > 0


def test_opencl_build_errors_are_build_errors():
    from tilegraph.runtime.opencl import _build

    with pytest.raises(tg.BuildError, match="OpenCL build failed"):
        _build("__kernel void k(__global float* x) { x[0] = undefined_name; }")
