import numpy as np
import pytest

from tilegraph.errors import GraphError
from tilegraph.graph import Graph, GraphBuilder, Node, TensorType, run_reference


def _mlp(names=("x", "w", "h", "y")):
    b = GraphBuilder("mlp")
    x = b.input(names[0], TensorType((2, 4), "float32"))
    w = b.constant(np.arange(12, dtype=np.float32).reshape(4, 3), names[1])
    h = b.add("matmul", [x, w], outputs=[names[2]])
    return b.build([b.add("relu", [h], outputs=[names[3]])])


def test_builder_infers_types_and_printer_shows_one_node_per_line():
    g = _mlp()
    assert g.values["h"] == TensorType((2, 3), "float32")
    text = str(g)
    assert "h: float32[2, 3] = matmul(x, w:const)" in text and "y: float32[2, 3] = relu(h)" in text
    assert text.count("\n") == len(g.nodes) + 3


def test_constants_are_read_only_and_not_copied():
    w = np.ones((4, 3), np.float32)
    b = GraphBuilder()
    name = b.constant(w, "w")
    assert np.shares_memory(b.constants[name], w) and not b.constants[name].flags.writeable


def test_structural_hash_ignores_names_but_not_structure():
    assert _mlp().structural_hash() == _mlp(("a", "b", "c", "d")).structural_hash()
    g = _mlp()
    other = g.replace(nodes=(g.nodes[0], Node("sigmoid", ("h",), ("y",), name="s")))
    assert other.structural_hash() != g.structural_hash()


def test_verifier_names_the_problem():
    g = _mlp()
    with pytest.raises(GraphError, match="reads 'h' before it is defined"):
        g.replace(nodes=tuple(reversed(g.nodes))).verify()
    with pytest.raises(GraphError, match="declares outputs"):
        g.replace(values={**g.values, "y": TensorType((3, 3), "float32")}).verify()
    with pytest.raises(GraphError, match="never defined"):
        Graph("g", ("x",), ("nope",), (), {"x": TensorType((1,), "float32")}).verify()


def test_shape_inference_errors_name_the_node():
    b = GraphBuilder()
    x = b.input("x", TensorType((2, 4), "float32"))
    with pytest.raises(GraphError, match="'bad' \\(matmul\\).*disagree on K"):
        b.add("matmul", [x, x], name="bad")
    with pytest.raises(GraphError, match="do not broadcast"):
        b.add("add", [x, b.constant(np.ones(3, np.float32))])


def test_reference_runs_the_graph():
    g = _mlp()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    out = run_reference(g, {"x": x})["y"]
    np.testing.assert_allclose(out, np.maximum(x.astype(np.float64) @ g.constants["w"], 0), rtol=1e-6)
