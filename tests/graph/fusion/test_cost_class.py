"""cost_class: groups alike but for their scalar constants share one measurement; anything that
changes the code (shapes, ops, a constant folded away, wiring) does not."""

import numpy as np
import pytest

from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.compile import compile_model
from tilegraph.graph.fusion.cost_class import cost_class
from tilegraph.graph.fusion.partition import partition


def _scaled_blocks(scales, width=8, shift=0.5):
    """Blocks relu(x @ w_k * s_k + shift) + x: the weights differ (arrays: arguments), the scale is
    a literal of each block's kernel."""
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    x = b.input("x", TensorType((5, width), "float32"))
    for s in scales:
        w = b.constant((rng.standard_normal((width, width)) * 0.3).astype(np.float32))
        h = b.add("mul", [b.add("matmul", [x, w]), b.constant(np.array(s, np.float32))])
        h = b.add("relu", [b.add("add", [h, b.constant(np.array(shift, np.float32))])])
        x = b.add("add", [h, x])
    return b.build([x]), {"x": rng.standard_normal((5, width)).astype(np.float32)}


def _classes(graph):
    return [cost_class(graph, g) for g in partition(graph) if g.anchor is not None]


def test_blocks_differing_in_scalar_values_share_a_class():
    graph, _ = _scaled_blocks([0.5, 0.25, 3.0])
    first, second, third = _classes(graph)
    assert first == second == third


@pytest.mark.parametrize("other", [
    lambda: _scaled_blocks([0.5, 1.0]),            # a 1 folds the multiplication away
    lambda: _scaled_blocks([0.5, 0.0]),            # a 0 too
])
def test_special_values_change_the_class(other):
    graph, _ = other()
    first, second = _classes(graph)
    assert first != second


def test_shapes_change_the_class():
    a, _ = _scaled_blocks([0.5], width=8)
    b, _ = _scaled_blocks([0.5], width=12)
    assert _classes(a) != _classes(b)
    c, _ = _scaled_blocks([0.5], shift=0.0)  # the added 0 is another kind of constant
    assert _classes(a) != _classes(c)


@pytest.mark.needs_cc
def test_blp_measures_one_kernel_per_class_and_builds_every_chosen_one(tmp_path, monkeypatch):
    from tilegraph.tune.database import open_database

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))
    graph, inputs = _scaled_blocks([0.5, 0.25, 3.0, -2.0])
    model = compile_model(graph, orchestration="blp", optimize_graph=False)
    recorded = {r.workload_key for r in open_database(None).records() if r.meta.get("source") == "orchestration"}
    # each block's kernel holding its scale is its own binary; one of them was measured for all
    assert len(set(model.kernel_keys) - recorded) >= 3
    model._base[:] = 0xFF  # NaN everywhere: every value read must have been written
    got = model.run(inputs)[graph.outputs[0]]
    np.testing.assert_allclose(got, run_reference(graph, inputs)[graph.outputs[0]], rtol=2e-5, atol=2e-5)
