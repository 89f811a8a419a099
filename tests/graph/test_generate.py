"""Generation with a KV cache (graph/generate.py): values that follow the dims (positions past ..
past + seq, a causal mask over past + seq) computed at run time, and GPT-2's prefill and decode
files from both exporters generating ONNX Runtime's greedy tokens without recompiling."""

import contextlib
import io
import warnings

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import driver
from tilegraph.errors import GraphError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(5)


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _cached_attention():
    """x: float[1, seq, 8] and a cache past_k: float[1, past, 8]. Positions past .. past + seq
    (Range over two Shapes) pick rows of a table; keys are the cache and the new rows; a causal
    mask (key index <= query position) over past + seq; softmax; the cache returned longer."""
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Gather", ["xs", "one"], ["seq"], axis=0),
        helper.make_node("Shape", ["past_k"], ["ps"]), helper.make_node("Gather", ["ps", "one"], ["past"], axis=0),
        helper.make_node("Add", ["past", "seq"], ["total"]),
        helper.make_node("Range", ["past", "total", "one"], ["positions"]),
        helper.make_node("Gather", ["table", "positions"], ["pos"], axis=0),
        helper.make_node("Add", ["x", "pos"], ["q"]),
        helper.make_node("Concat", ["past_k", "q"], ["keys"], axis=1),
        helper.make_node("Transpose", ["keys"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Range", ["zero", "total", "one"], ["key_index"]),
        helper.make_node("Unsqueeze", ["positions", "axis1"], ["query_position"]),
        helper.make_node("LessOrEqual", ["key_index", "query_position"], ["visible"]),
        helper.make_node("Where", ["visible", "scores", "minus"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "keys"], ["out"]),
    ]
    inits = [_const("one", np.int64(1)), _const("zero", np.int64(0)), _const("axis1", np.array([1], np.int64)),
             _const("minus", np.float32(-1e9)), _const("table", RNG.standard_normal((64, 8)).astype(np.float32))]
    graph = helper.make_graph(nodes, "cached", [helper.make_tensor_value_info("x", F, [1, "seq", 8]),
                                                helper.make_tensor_value_info("past_k", F, [1, "past", 8])],
                              [helper.make_tensor_value_info(o, F, None) for o in ("out", "keys")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_positions_and_a_causal_mask_over_the_cache_follow_the_dims(tmp_path):
    from tilegraph.graph.serialize import load_model

    model = _cached_attention()
    compiled = tg.compile(model, dims={"seq": (1, 9), "past": (1, 30)})
    # positions: their values at the upper bounds plus (past - 30); the mask's key index over past + seq
    assert [n.op for n in compiled.graph.nodes].count("offset_by_dims") == 2
    assert compiled.graph.input_dims["key_index"] == ("seq+past",)
    compiled.save(tmp_path / "m.tg")
    loaded = load_model(tmp_path / "m.tg")
    session = ort.InferenceSession(model.SerializeToString())
    for seq, past in ((1, 1), (9, 30), (1, 17), (4, 6), (9, 1), (2, 29)):
        feeds = {"x": RNG.standard_normal((1, seq, 8)).astype(np.float32),
                 "past_k": RNG.standard_normal((1, past, 8)).astype(np.float32)}
        for got in (compiled.run(feeds), loaded.run(feeds)):
            for name, expected in zip(("out", "keys"), session.run(None, feeds)):
                assert got[name].shape == expected.shape
                np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5)


def test_a_value_that_follows_a_dim_but_not_in_steps_is_computed_not_guessed():
    """positions * positions: not one step per unit of past, so the folded product is computed
    at run time from the positions (the node the reader folded), whatever past is."""
    model = _cached_attention()
    graph = model.graph
    square = helper.make_node("Mul", ["positions", "positions"], ["squared"])
    graph.node.insert(6, square)
    graph.node[7].input[1] = "squared"  # the table row is positions²
    graph.initializer[-1].CopyFrom(_const("table", RNG.standard_normal((1600, 8)).astype(np.float32)))
    compiled = tg.compile(model, dims={"seq": (1, 9), "past": (1, 30)})
    assert "mul" in [n.op for n in compiled.graph.nodes]
    session = ort.InferenceSession(model.SerializeToString())
    for seq, past in ((3, 5), (9, 30), (1, 1)):
        feeds = {"x": RNG.standard_normal((1, seq, 8)).astype(np.float32),
                 "past_k": RNG.standard_normal((1, past, 8)).astype(np.float32)}
        got = compiled.run(feeds)
        np.testing.assert_allclose(got["out"], session.run(None, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def decoder_files(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("onnxscript")
    from tilegraph.graph import zoo

    cache = {}

    def get(exporter):
        if exporter not in cache:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                cache[exporter] = zoo.export_decoder("gpt2", tmp_path_factory.mktemp(exporter), small=True,
                                                     exporter=exporter)
        return cache[exporter]

    return get


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_gpt2_generates_the_greedy_tokens_of_onnxruntime(decoder_files, exporter, monkeypatch):
    from tilegraph.graph.generate import compile_decoder, greedy, onnxruntime_step

    prefill, decode = decoder_files(exporter)
    decoder = compile_decoder(prefill, decode, max_length=40, orchestration="greedy")
    monkeypatch.setattr(driver, "build", lambda *a, **k: pytest.fail("recompiled while generating"))
    reference = (onnxruntime_step(ort.InferenceSession(str(prefill))),
                 onnxruntime_step(ort.InferenceSession(str(decode))))
    for length in (16, 3):
        prompt = RNG.integers(0, 50257, length)
        ours = decoder.generate(prompt, 16, keep_logits=True)
        theirs = greedy(*reference, prompt, 16, keep_logits=True)
        assert ours.tokens == theirs.tokens
        assert len(set(ours.tokens)) > 4  # the tokens vary: the comparison could fail
        for got, expected in zip(ours.logits, theirs.logits):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    assert len(ours.decode_s) == 15 and ours.decode_tokens_per_s > 0


def test_a_generation_longer_than_compiled_for_is_refused(decoder_files):
    from tilegraph.graph.generate import compile_decoder

    decoder = compile_decoder(*decoder_files("legacy"), max_length=12, orchestration="greedy")
    with pytest.raises(GraphError, match="exceed the 12 tokens"):
        decoder.generate(np.arange(8), 5)
    assert len(decoder.generate(np.arange(8), 4).tokens) == 4


def test_expected_prompts_outside_the_length_are_refused_before_compiling(decoder_files):
    from tilegraph.graph.generate import compile_decoder

    for lengths in ([12], [0], [], [3.0]):
        with pytest.raises(GraphError, match=r"prompt_lengths must be integers in \[1, 11\]"):
            compile_decoder("nowhere/prefill.onnx", "nowhere/decode.onnx", max_length=12, prompt_lengths=lengths)


def test_the_cli_generates_and_compares_with_onnxruntime(decoder_files, capsys):
    import json

    from tilegraph.cli.main import main

    folder = decoder_files("legacy")[0].parent
    assert main(["generate", str(folder), "--prompt-len", "5", "--new-tokens", "6", "--vs", "onnxruntime",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens_identical_to_onnxruntime"] is True and len(report["tokens"]) == 6
    assert set(report["systems"]) == {"tilegraph", "onnxruntime"}
    assert main(["generate", str(folder), "--prompt-len", "5", "--new-tokens", "6", "--max-length", "8"]) == 2
    assert "exceed --max-length 8" in capsys.readouterr().err
    assert main(["generate", str(folder / "nowhere")]) == 2
    assert "neither a folder" in capsys.readouterr().err


def test_tuning_with_weights_timed_from_memory_keeps_the_model_right():
    """evict_weights=True (what compile_decoder tunes its decode model with): the candidates are
    timed with their weights flushed; what it builds still computes the model."""
    model = _cached_attention()
    compiled = tg.compile(model, dims={"seq": (1, 9), "past": (1, 30)}, trials=2, evict_weights=True)
    assert compiled.tuning is not None and compiled.tuning.rows
    session = ort.InferenceSession(model.SerializeToString())
    feeds = {"x": RNG.standard_normal((1, 3, 8)).astype(np.float32),
             "past_k": RNG.standard_normal((1, 20, 8)).astype(np.float32)}
    np.testing.assert_allclose(compiled.run(feeds)["out"], session.run(None, feeds)[0], rtol=1e-4, atol=1e-5)
