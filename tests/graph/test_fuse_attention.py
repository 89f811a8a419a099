"""fuse_attention: the unfused attention graphs the exporters write become one attention node, which
computes what they did (fully masked rows included) through the reference and compiled in C."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.passes import fuse_attention

RNG = np.random.default_rng(11)
HEADS, SEQ, DEPTH = 3, 13, 8  # an odd sequence length: no vector divides it


def _attention_graph(style: str, escape: bool = False):
    """BERT's form (matmul, div, add mask, softmax, matmul) or GPT-2's (mul, add, softmax,
    where(isnan), matmul); `escape` also makes the softmax a graph output."""
    b = GraphBuilder(style)
    q = b.input("q", TensorType((1, HEADS, SEQ, DEPTH), "float32"))
    kt = b.input("kt", TensorType((1, HEADS, DEPTH, SEQ), "float32"))
    v = b.input("v", TensorType((1, HEADS, SEQ, DEPTH), "float32"))
    mask = b.input("mask", TensorType((1, 1, SEQ, SEQ), "float32"))
    s = b.add("matmul", [q, kt])
    if style == "bert":
        s = b.add("div", [s, b.constant(np.array(np.sqrt(DEPTH), np.float32))])
        p = b.add("softmax", [b.add("add", [s, mask])], {"axis": -1})
    else:
        s = b.add("mul", [s, b.constant(np.array(0.25, np.float32))])
        soft = b.add("softmax", [b.add("add", [mask, s])], {"axis": 3})
        p = b.add("where", [b.add("isnan", [soft]), b.constant(np.array(0.0, np.float32)), soft])
    out = b.add("matmul", [p, v])
    return b.build([out, p] if escape else [out])


def _inputs():
    mask = np.where(RNG.random((1, 1, SEQ, SEQ)) < 0.3, -np.inf, 0.0).astype(np.float32)
    mask[..., 4, :] = -np.inf  # every key masked: NaN through softmax, 0 behind GPT-2's where(isnan)
    return {"q": RNG.standard_normal((1, HEADS, SEQ, DEPTH)).astype(np.float32),
            "kt": RNG.standard_normal((1, HEADS, DEPTH, SEQ)).astype(np.float32),
            "v": RNG.standard_normal((1, HEADS, SEQ, DEPTH)).astype(np.float32), "mask": mask}


@pytest.mark.parametrize("style", ["bert", "gpt2"])
def test_the_exporters_attention_becomes_one_node_with_the_same_values(style):
    g = _attention_graph(style)
    fired: list[str] = []
    fused = fuse_attention(g, fired)
    assert fused.op_counts() == {"attention": 1} and len(fired) == 1
    node = fused.nodes[0]
    assert node.attr("nan_to_zero") == (style == "gpt2") and node.attr("divide") == (style == "bert")
    inputs = _inputs()
    want = run_reference(g, inputs)[g.outputs[0]]
    got = run_reference(fused, inputs)[g.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want[0, :, 4]).all() == (style == "bert")


@pytest.mark.needs_cc
@pytest.mark.parametrize("style", ["bert", "gpt2"])
def test_compiled_with_the_rewrite_matches_the_unfused_model(style, tmp_path):
    g = _attention_graph(style)
    inputs = _inputs()
    plain = tg.compile(g)
    fused = tg.compile(g, extra_rewrites=("fuse_attention",))
    assert any(r.startswith("fuse_attention") for r in fused.rewrites)
    assert any("attention" in k.nodes[-1] or "attention" in k.name for k in fused.kernels)
    a, b = plain.run(inputs), fused.run(inputs)
    a, b = (x[g.outputs[0]] if isinstance(x, dict) else x[0] for x in (a, b))
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.isnan(b), np.isnan(a))
    fused.save(tmp_path / "m")
    c = tg.load(tmp_path / "m").run(inputs)
    c = c[g.outputs[0]] if isinstance(c, dict) else c[0]
    np.testing.assert_array_equal(c, b)  # saved and loaded: the same kernels, the same bits


def test_no_fusion_when_an_intermediate_is_read_elsewhere():
    g = _attention_graph("gpt2", escape=True)
    assert fuse_attention(g) is g
    b = GraphBuilder("broadcast_batch")  # kt shared by every head (a broadcast): not fused
    q = b.input("q", TensorType((2, SEQ, DEPTH), "float32"))
    kt = b.input("kt", TensorType((1, DEPTH, SEQ), "float32"))
    v = b.input("v", TensorType((2, SEQ, DEPTH), "float32"))
    out = b.add("matmul", [b.add("softmax", [b.add("matmul", [q, kt])], {"axis": -1}), v])
    g2 = b.build([out])
    assert fuse_attention(g2) is g2


@pytest.mark.needs_cc
def test_tuning_a_fused_attention_measures_its_row_block_schedules(tmp_path):
    """The attention task is tuned like any other: Gensor's candidates are the row-block schedules
    (checked against float64 by the measurer), the model is built from the best record."""
    from tilegraph.tune.database import open_database

    g = _attention_graph("gpt2")
    inputs = _inputs()
    model = tg.compile(g, db=tmp_path / "t.db", trials=5, extra_rewrites=("fuse_attention",), orchestration="greedy")
    db = open_database(tmp_path / "t.db", readonly=True)
    records = list(db.records())
    db.close()
    assert len(records) == 5 and all(r.kind == "ok" for r in records)
    # the scheduler's first measurement is the default schedule (the row-block one, 8 rows); Gensor
    # then proposes the other rows choices (its own 8-row schedule is the same trace: not measured twice)
    assert [r.meta.get("strategy") for r in records].count("default") == 1
    assert sorted(r.meta["attention_rows"] for r in records if r.meta.get("strategy") == "gensor") == [1, 2, 4, 16]
    assert all(model.tuned)
    want = run_reference(g, inputs)[g.outputs[0]]
    got = model.run(inputs)
    got = got[g.outputs[0]] if isinstance(got, dict) else got[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
