import re
import shutil

import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.codegen.cuda import codegen_cuda, entry_names
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.tune.gensor.gpu_state import gpu_schedule, gpu_search
from tilegraph.tune.hardware_gpu import gpu_hardware

CUDA = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0", cc=shutil.which("nvcc") or "nvcc")
SPECS = ["matmul:32,16,24", "conv2d_nhwc:1,6,6,4,8,3,1,1", "depthwise_conv2d_nhwc:1,6,6,8,3,1,1",
         "softmax:4,32", "layer_norm:4,32"]


def _source(spec):
    wl = workloads.from_spec(spec)
    state = gpu_search(wl, gpu_hardware(CUDA), top_k=1)[0]
    return codegen_cuda(lower_gpu(gpu_schedule(wl, state).func, CUDA))


@pytest.fixture(scope="module")
def sources():
    return {spec: _source(spec) for spec in SPECS}


def test_gemm_source_uses_cuda_builtins(sources):
    code = sources[SPECS[0]].code
    assert '__global__' in code and "__launch_bounds__" in code
    assert "threadIdx.x" in code and "blockIdx.x" in code
    assert "__shared__ __align__(16) float" in code and "__syncthreads();" in code
    assert "<<<dim3(" in code
    names = entry_names(sources[SPECS[0]].program)
    for entry in names.values():
        assert f'extern "C" int {entry}(' in code


def test_every_kernel_is_launched_in_order(sources):
    src = sources["softmax:4,32"]
    launches = re.findall(r"(\w+)<<<", src.code)
    assert tuple(launches) == src.kernels and len(src.kernels) == 3


@pytest.mark.needs_nvcc
def test_sources_compile_with_nvcc(sources, tmp_path):
    from tilegraph.build.compile import check_cuda_syntax

    # One translation unit, each program in its own namespace: one nvcc start-up for all five.
    parts = ["#include <stdint.h>", "#include <math.h>", "#include <cuda_runtime.h>"]
    for n, src in enumerate(sources.values()):
        parts.append(f"namespace p{n} {{\n{src.code}\n}}")
    check_cuda_syntax("\n".join(parts), CUDA)


@pytest.mark.needs_nvcc
def test_nvcc_errors_become_build_errors():
    from tilegraph.build.compile import check_cuda_syntax

    with pytest.raises(tg.BuildError, match="nvcc failed|does not compile"):
        check_cuda_syntax("__global__ void k() { undefined_name = 1; }", CUDA)


@pytest.mark.needs_gpu
def test_gemm_runs_on_the_gpu(rng):
    import numpy as np

    wl = workloads.from_spec("matmul:64,32,48")
    kernel = tg.build(gpu_schedule(wl, gpu_search(wl, gpu_hardware(tg.Target("cuda")), top_k=1)[0]), target="cuda")
    a, b = (rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs)
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.needs_nvcc
def test_nvcc_builds_through_the_content_addressed_cache(sources, tmp_path, monkeypatch):
    """compile_cuda uses build/'s cache: the second build is a lookup, the key follows the Target's flags."""
    from tilegraph.build import compile as build_compile

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    code = sources["softmax:4,32"].code
    first = build_compile.compile_cuda(code, CUDA, name="softmax")
    assert first.is_file() and first.parent.parent == tmp_path / "build"
    runs = []

    def refuse(command, timeout):
        runs.append(command)
        raise build_compile.CompilerFailed("stub")

    monkeypatch.setattr(build_compile, "run_compiler", refuse)
    assert build_compile.compile_cuda(code, CUDA) == first and not runs, "cached: nvcc does not run again"
    other_arch = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="9.0", cc=CUDA.cc)
    with pytest.raises(tg.BuildError, match="stub"):
        build_compile.compile_cuda(code, other_arch)
    assert "-arch=sm_90" in runs[0], "another -arch is another cache entry, built with the Target's flags"
