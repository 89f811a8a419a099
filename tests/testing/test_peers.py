"""testing/peers.py: the peers' equivalent of a workload, from the op library's reference metadata."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import te, workloads
from tilegraph.testing.peers import PeerUnavailable, peer_function


def test_numpy_runs_the_same_matmul():
    wl = workloads.from_spec("matmul:6,5,4")
    a, b = (np.random.default_rng(n).standard_normal(t.shape).astype("float32") for n, t in enumerate(wl.inputs))
    np.testing.assert_allclose(np.asarray(peer_function("numpy", wl, [a, b])()), a @ b, rtol=1e-5)


def test_unknown_peers_and_workloads_without_an_equivalent_are_clear():
    wl = workloads.from_spec("matmul:6,5,4")
    with pytest.raises(ValueError, match="unknown peer 'mxnet'"):
        peer_function("mxnet", wl, [])
    x = te.placeholder((3,), name="X")
    hand = tg.Workload([x], [te.compute((3,), lambda i: x[i] * 3.0, name="Y")])
    with pytest.raises(PeerUnavailable):
        peer_function("numpy", hand, [np.zeros(3, np.float32)])


def test_torch_runs_the_same_layer_norm():
    pytest.importorskip("torch")
    from tilegraph.testing import random_inputs, reference_outputs

    wl = workloads.from_spec("layer_norm:7,33")
    inputs = random_inputs(wl, seed=2)
    got = peer_function("torch", wl, inputs)().numpy()
    np.testing.assert_allclose(got, reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)


def _wl(fn, *shapes):
    xs = [te.placeholder(shape, name=f"X{n}") for n, shape in enumerate(shapes)]
    return tg.Workload(xs, [fn(*xs)])


@pytest.mark.parametrize("build", [
    lambda: _wl(lambda x, w: tg.ops.conv2d_nhwc(x, w, (2, 2), (1, 1), (1, 1), 3), (1, 7, 7, 6), (3, 3, 2, 6)),
    lambda: _wl(tg.ops.matmul_nd, (2, 5, 3), (2, 3, 4)),
    lambda: _wl(lambda x: tg.ops.max_pool2d(x, (3, 3), (2, 2), (1, 1), "NHWC"), (1, 9, 9, 4)),
    lambda: _wl(lambda x: tg.ops.mean(x, (1, 2), True), (1, 5, 5, 8)),
], ids=["grouped-conv", "batched-matmul", "max-pool-nhwc", "mean"])
def test_torch_runs_the_model_tasks_ops(build):
    """The ops of the four reference models' tasks have a PyTorch equivalent computing the same."""
    pytest.importorskip("torch")
    from tilegraph.testing import random_inputs, reference_outputs

    wl = build()
    inputs = random_inputs(wl, seed=3)
    got = peer_function("torch", wl, inputs)().numpy()
    np.testing.assert_allclose(got, reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)
