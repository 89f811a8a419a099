"""winograd_conv: 3x3 convolutions of stride 1 as Winograd's F(m x m, 3 x 3), on by default for
float32 CPU compiles: the same values as the direct convolution (reference and compiled in C, odd
sizes, uneven padding, a residual and bias fused around it), only where enough tiles make it pay,
and the transforms never tuning tasks."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError
from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.fusion.partition import partition
from tilegraph.graph.passes import optimize_float32_cpu, winograd_conv
from tilegraph.graph.tuning.tasks import extract_tasks

RNG = np.random.default_rng(5)


def _conv(h, w, c, k, kernel=3, stride=1, pads=(1, 1, 1, 1), groups=1, dilation=1, n=1, residual=False,
          bias=True, constant_weights=True):
    b = GraphBuilder("conv3x3")
    x = b.input("x", TensorType((n, h, w, c), "float32"))
    weights = (RNG.standard_normal((kernel, kernel, c // groups, k)) / np.sqrt(9 * c)).astype(np.float32)
    w_name = b.constant(weights) if constant_weights else b.input("w", TensorType(weights.shape, "float32"))
    inputs = [x, w_name] + ([b.constant(RNG.standard_normal(k).astype(np.float32))] if bias else [])
    y = b.add("conv2d", inputs, {"layout": "NHWC", "strides": (stride, stride), "pads": pads, "groups": groups,
                                 "dilations": (dilation, dilation)})
    if residual:
        y = b.add("add", [y, b.input("r", TensorType(b.build([y]).type_of(y).shape, "float32"))])
    graph = b.build([b.add("relu", [y])])
    feeds = {"x": RNG.standard_normal((n, h, w, c)).astype(np.float32)}
    if residual:
        feeds["r"] = RNG.standard_normal(graph.type_of(graph.inputs[1]).shape).astype(np.float32)
    if not constant_weights:
        feeds["w"] = weights
    return graph, feeds


@pytest.mark.parametrize("h,w,n,m", [(24, 24, 1, 4), (12, 12, 1, 2), (11, 13, 1, 2), (11, 13, 3, 4), (7, 7, 3, 2),
                                     (25, 23, 1, 4)])
def test_the_tile_is_the_largest_with_enough_tiles(h, w, n, m):
    g, feeds = _conv(h, w, 16, 16, n=n)
    fired: list[str] = []
    after = winograd_conv(g, fired)
    assert fired == [f"winograd_conv: conv2d_0 as F({m}x{m}, 3x3)"]
    assert "conv2d" not in after.op_counts() and after.op_counts()["winograd_input"] == 1
    want, got = run_reference(g, feeds)[g.outputs[0]], run_reference(after, feeds)[g.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    dict(stride=2), dict(groups=2), dict(dilation=2, pads=(2, 2, 2, 2)), dict(kernel=5, pads=(2, 2, 2, 2)),
    dict(kernel=1, pads=(0, 0, 0, 0)), dict(c=8), dict(h=7, w=7), dict(constant_weights=False)])
def test_other_convolutions_are_left_alone(kwargs):
    shape = dict(h=kwargs.pop("h", 24), w=kwargs.pop("w", 24), c=kwargs.pop("c", 16), k=16)
    g, _ = _conv(**shape, **kwargs)
    fired: list[str] = []
    assert winograd_conv(g, fired) is g and not fired


@pytest.mark.needs_cc
@pytest.mark.parametrize("h,w,c,k,pads,n", [(25, 23, 17, 19, (1, 0, 2, 1), 1), (12, 12, 16, 24, (1, 1, 1, 1), 2),
                                            pytest.param(28, 28, 32, 16, (0, 0, 0, 0), 1,
                                                         marks=pytest.mark.extended)])
def test_compiled_by_default_with_the_direct_values(h, w, c, k, pads, n):
    g, feeds = _conv(h, w, c, k, pads=pads, n=n, residual=True)
    want = run_reference(g, feeds)[g.outputs[0]]
    model = tg.compile(g)
    assert any(r.startswith("winograd_conv:") for r in model.rewrites)
    got = model.run(feeds)[g.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    direct = tg.compile(g, skip_rewrites=("winograd_conv",))
    assert not any(r.startswith("winograd_conv:") for r in direct.rewrites)
    np.testing.assert_allclose(direct.run(feeds)[g.outputs[0]], want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.needs_cc
def test_saved_and_loaded_bit_for_bit(tmp_path):
    g, feeds = _conv(20, 20, 16, 16, residual=True)
    model = tg.compile(g)
    before = model.run(feeds)[g.outputs[0]]
    loaded = tg.load(model.save(tmp_path / "w.tg"))
    np.testing.assert_array_equal(loaded.run(feeds)[g.outputs[0]], before)


def test_the_transforms_are_not_tuning_tasks():
    """Their schedule is final (every point unrolled); the batched GEMM between them is the task."""
    g, _ = _conv(24, 24, 16, 16, residual=True)
    after = optimize_float32_cpu(g, [])
    tasks = extract_tasks(after, partition(after))
    assert [t.op for t in tasks] == ["matmul"]


def test_an_unknown_rewrite_to_skip_is_named():
    g, _ = _conv(24, 24, 16, 16)
    with pytest.raises(GraphError, match="unknown default rewrite.*winograd_conv"):
        optimize_float32_cpu(g, [], skip=("winograd",))


def test_compile_names_an_unknown_rewrite_to_skip_whatever_the_precision():
    g, _ = _conv(24, 24, 16, 16)
    with pytest.raises(GraphError, match="unknown default rewrite.*winograd.*known: winograd_conv"):
        tg.compile(g, precision="bf16", skip_rewrites=("winograd",))
