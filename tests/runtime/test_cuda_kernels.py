"""CUDA kernels on a real GPU: the default GPU schedule and Gensor's best GPU states of each op, at
odd and tiny sizes, outputs NaN-poisoned, checked against the float64 numpy references (needs an
NVIDIA GPU; CI has none, the device sessions run it)."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.testing.data import random_inputs
from tilegraph.testing.reference import reference_outputs

pytestmark = pytest.mark.needs_gpu

SPECS = [
    "matmul:1,1,1", "matmul:7,13,5", "matmul:33,65,17", "matmul:128,96,64", "batch_matmul:2,17,9,31",
    "dense:5,37,11", "conv2d_nhwc:1,9,9,5,7,3,1,1", "conv2d_nhwc:1,8,8,16,32,3,2,1",
    "depthwise_conv2d_nhwc:1,9,9,5,3,1,1", "softmax:5,37", "softmax:3,1000", "layer_norm:7,100", "sum:37,5",
    "max:3,64", "mean:9,33", "max_pool2d:1,9,9,3,3,2,1", "gelu:7,33", "add:5,7", "transpose:17,9", "matmul:1,300,13",
    "global_avg_pool2d:1,3,3,7",
]
TOP_K = 3


def _check(kernel, wl, seed):
    inputs = random_inputs(wl, seed=seed)
    got = kernel(*inputs)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for out, ref in zip(got, reference_outputs(wl, inputs)):
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("spec", SPECS)
def test_default_schedule_and_gensor_states_are_correct_on_the_gpu(spec):
    from tilegraph.tune.gensor.gpu_state import gpu_candidates

    wl = workloads.from_spec(spec)
    target = tg.Target("cuda")
    _check(tg.build(wl, target), wl, seed=1)
    for i, (trace, _, _) in enumerate(gpu_candidates(wl, target, top_k=TOP_K)):
        _check(tg.build(tg.Schedule.replay(wl, trace), target), wl, seed=2 + i)
