"""runtime/launch.py: every kernel has the same protocol and is timed the same way."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.runtime.launch import KernelProtocol
from tilegraph.runtime.timer import TimingResult

TARGETS = [pytest.param("cpu -isa=avx2", marks=pytest.mark.needs_cc),
           pytest.param("opencl", marks=pytest.mark.needs_opencl)]


@pytest.fixture(params=TARGETS)
def softmax(request):
    wl = workloads.from_spec("softmax:5,33")
    return wl, tg.build(wl, request.param)


def test_every_kernel_follows_the_protocol(softmax, rng):
    wl, kernel = softmax
    assert isinstance(kernel, KernelProtocol)
    assert kernel.source and kernel.target.kind in ("cpu", "opencl")
    assert [b.name for b in kernel.inputs] == [t.name for t in wl.inputs]
    x = rng.standard_normal((5, 33)).astype("float32")
    want = np.exp(x - x.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(kernel(x), want, rtol=1e-5, atol=1e-6)
    out = np.full((5, 33), np.nan, np.float32)
    assert kernel(x, out=out, num_threads=1) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    timing = kernel.time(x, warmup=1, min_time=0.0, repeat=3)
    assert isinstance(timing, TimingResult) and len(timing.samples) >= 3 and timing.median > 0


def test_bad_arguments_are_refused_alike(softmax):
    _, kernel = softmax
    with pytest.raises(TypeError, match="1 input"):
        kernel()
    with pytest.raises(TypeError, match="float64"):
        kernel(np.zeros((5, 33)))
    with pytest.raises(ValueError):
        kernel(np.zeros((5, 32), np.float32))
    with pytest.raises(TypeError, match="outputs, out= gave 2"):
        kernel(np.zeros((5, 33), np.float32), out=(np.zeros((5, 33), np.float32),) * 2)


def test_a_launch_keeps_its_input_arrays_alive(softmax, rng):
    """bind() holds the inputs' addresses: the launch keeps the arrays alive, so inputs passed as
    temporaries (the runner's aligned copies) are never freed and reused under a running kernel."""
    import gc

    wl, kernel = softmax
    x = rng.standard_normal((5, 33)).astype("float32")
    want = np.exp(x - x.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    out = np.full((5, 33), np.nan, np.float32)
    launch = kernel.bind([x.copy()], [out])  # the copy's only reference is the launch's
    gc.collect()
    junk = [np.full((5, 33), 1e30, np.float32) for _ in range(64)]  # reuses freed memory, if any
    launch.run()
    np.testing.assert_allclose(launch.outputs()[0].reshape(5, 33), want, rtol=1e-5, atol=1e-6)
    del junk
