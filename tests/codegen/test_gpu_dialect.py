"""codegen/gpu_dialect.py: one printer for CUDA and OpenCL; the dialect table is the only difference."""

import pytest

import tilegraph as tg
from tests.lower.gpu.test_pipeline import gemm_schedule
from tilegraph.codegen.gpu_dialect import CUDA, OPENCL, check_dialect, helpers, kernel_param_names, print_kernels
from tilegraph.lower.gpu.pipeline import lower_gpu


@pytest.fixture(scope="module")
def program():
    _, sch = gemm_schedule()
    return lower_gpu(sch.func, tg.Target("opencl", device_name="t", num_sms=1, shared_memory_bytes=32 << 10,
                                         max_threads_per_block=256))


def test_both_dialects_print_the_same_kernels_in_their_own_words(program):
    cuda, cuda_entries = print_kernels(program, CUDA)
    opencl, opencl_entries = print_kernels(program, OPENCL)
    assert cuda_entries == opencl_entries and len(cuda_entries) == len(program.kernels)
    assert "__syncthreads();" in cuda and "barrier(CLK_LOCAL_MEM_FENCE" in opencl
    assert "threadIdx.x" in cuda and "get_local_id(0)" in opencl
    assert kernel_param_names(program)[0][:2] == ["a", "b"]


def test_helpers_define_the_ir_operators_for_each_dialect():
    for d in (CUDA, OPENCL):
        text = helpers(d)
        for name in ("tgh_floordiv_int32_t", "tgh_floormod_int32_t", "tgh_abs_float", "tgh_max_float", "tgh_sigmoid_float"):
            assert name in text, (d.name, name)
    with pytest.raises(ValueError, match="unknown GPU dialect 'metal'"):
        check_dialect("metal")
