import numpy as np
import pytest

import tilegraph as tg
from tests.lower.gpu.test_pipeline import gemm_schedule
from tilegraph.codegen.gpu_dialect import CUDA, OPENCL, helpers
from tilegraph.codegen.opencl import codegen_opencl
from tilegraph.lower.gpu.pipeline import lower_gpu


@pytest.fixture(scope="module")
def gemm():
    wl, sch = gemm_schedule()
    return wl, codegen_opencl(lower_gpu(sch.func, tg.Target("opencl")))


def test_source_uses_opencl_builtins(gemm):
    _, src = gemm
    assert "__kernel" in src.code and "reqd_work_group_size(4, 4, 1)" in src.code
    assert "get_local_id(0)" in src.code and "get_group_id(1)" in src.code
    assert "__local float" in src.code and "barrier(CLK_LOCAL_MEM_FENCE" in src.code
    assert "__global float* restrict" in src.code
    assert "threadIdx" not in src.code and "__syncthreads" not in src.code


def test_dialect_table_differs_only_where_the_languages_do():
    assert CUDA.barrier == "__syncthreads();" and OPENCL.barrier.startswith("barrier(")
    assert "double" in helpers(CUDA) and "double" not in helpers(OPENCL)
    assert "#define expf exp" in OPENCL.prelude


@pytest.mark.needs_opencl
def test_gemm_runs_on_opencl(gemm, rng):
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import OpenCLKernel, available

    if not available():
        pytest.skip("no OpenCL device")
    wl, src = gemm
    a, b = (rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs)
    kernel = OpenCLKernel(src.program, src, n_inputs=2)
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
