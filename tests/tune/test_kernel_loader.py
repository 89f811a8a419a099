"""tune/kernel_loader.py: what a build worker ships, and the kernel a runner worker gets back."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.tune.builder import workload_args
from tilegraph.tune.kernel_loader import LOADERS, describe_kernel, load_kernel
from tilegraph.tune.result import BuildResult

pytestmark = pytest.mark.needs_cc


def test_a_cpu_kernel_round_trips_through_its_description(tmp_path, monkeypatch, rng):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    wl = workloads.from_spec("softmax:3,9")
    target = tg.Target("cpu", isa="avx2")
    build = describe_kernel(tg.build(wl, target), target, workload_args(wl), 0.1)
    assert build.ok and build.loader == "runtime" and build.lib_path.endswith(".so")
    kernel = load_kernel(build)
    x = rng.standard_normal((3, 9)).astype(np.float32)
    out = np.full((3, 9), np.nan, np.float32)
    launch = kernel.bind([x], [out], num_threads=1)
    launch.run()
    (got,) = launch.outputs()
    assert got is out and np.allclose(got.sum(1), 1.0)


def test_unknown_loaders_and_bad_payloads_are_clear():
    assert {"runtime", "raw", "opencl", "cuda"} <= set(LOADERS)
    with pytest.raises(ValueError, match="unknown kernel loader 'metal'"):
        load_kernel(BuildResult(True, loader="metal"))
    with pytest.raises(ValueError, match="GpuKernelSpec payload"):
        load_kernel(BuildResult(True, loader="opencl"))
