"""Run-time dims of whole models (graph/dims.py): one compiled ONNX model for a range of sequence
lengths, checked against ONNX Runtime at lengths across the range (1 and the upper bound
included), with no recompilation; and every way the dims can be given wrong."""

import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import driver
from tilegraph.errors import GraphError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(32)
UPPER = 24


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _attention_model(last_token=False):
    """x: float[1, seq, 8] -> positions added (Range over Shape), a projection, reshape to two
    heads through a Shape/Gather/Concat chain, attention over the sequence (softmax over keys),
    and the mean over the sequence: every place a static upper bound would give wrong numbers."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["n"], axis=0),
        helper.make_node("Range", ["zero", "n", "step"], ["positions"]),
        helper.make_node("Gather", ["pos_table", "positions"], ["pos"], axis=0),
        helper.make_node("Add", ["x", "pos"], ["xp"]),
        helper.make_node("MatMul", ["xp", "w"], ["y"]),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n1"]),
        helper.make_node("Concat", ["batch", "n1", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["y", "target"], ["r"]),
        helper.make_node("Transpose", ["r"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "q"], ["attended"]),
        helper.make_node("ReduceMean", ["attended", "axis2"], ["pooled"], keepdims=1),
    ]
    outputs = ["attended", "pooled"]
    if last_token:  # a slice starting at seq - 1: its start depends on the dim
        nodes += [helper.make_node("Sub", ["n1", "one1"], ["start"]),
                  helper.make_node("Slice", ["x", "start", "n1", "one1"], ["last"])]
        outputs.append("last")
    inits = [_const("one", np.int64(1)), _const("zero", np.int64(0)), _const("step", np.int64(1)),
             _const("pos_table", RNG.standard_normal((64, 8)).astype(np.float32)),
             _const("w", RNG.standard_normal((8, 8)).astype(np.float32)),
             _const("axis0", np.array([0], np.int64)), _const("axis2", np.array([2], np.int64)),
             _const("batch", np.array([1], np.int64)), _const("heads", np.array([2, 4], np.int64)),
             _const("one1", np.array([1], np.int64))]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", F, [1, "seq", 8])],
                              [helper.make_tensor_value_info(o, F, None) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.fixture(scope="module")
def attention():
    model = _attention_model()
    return model, tg.compile(model, dims={"seq": (1, UPPER)})


@pytest.mark.parametrize("length", [1, 2, 7, 16, UPPER - 1, UPPER])
def test_one_model_matches_onnxruntime_at_every_length(attention, length):
    model, compiled = attention
    x = RNG.standard_normal((1, length, 8)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    got = compiled(x)
    for e, g in zip(expected, got):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_lengths_in_any_order_never_recompile(attention, monkeypatch):
    model, compiled = attention
    builds = []
    monkeypatch.setattr(driver, "build", lambda *a, **k: builds.append(a) or pytest.fail("recompiled"))
    session = ort.InferenceSession(model.SerializeToString())
    for length in (UPPER, 3, 1, 11, 3, UPPER):
        x = RNG.standard_normal((1, length, 8)).astype(np.float32)
        np.testing.assert_allclose(compiled(x)[1], session.run(None, {"x": x})[1], rtol=1e-4, atol=1e-5)
    assert builds == []
    assert compiled.dims == {"seq": (1, UPPER)}


def test_inputs_outside_the_range_or_off_the_static_shape_are_refused(attention):
    _, compiled = attention
    with pytest.raises(GraphError, match=r"dim seq = 25, outside its range \[1, 24\]"):
        compiled(np.zeros((1, UPPER + 1, 8), np.float32))
    with pytest.raises(GraphError, match="the model takes float32\\[1, seq, 8\\]"):
        compiled(np.zeros((1, 4, 9), np.float32))
    with pytest.raises(GraphError, match="dtype"):
        compiled(np.zeros((1, 4, 8), np.float64))


def test_a_dim_without_a_range_is_named():
    with pytest.raises(GraphError, match=r"symbolic extent 'seq'.*dims=\{'seq'"):
        tg.compile(_attention_model())


def test_dims_naming_no_symbolic_extent_are_refused():
    with pytest.raises(GraphError, match=r"dims names \['batch'\].*dim_params: seq"):
        tg.compile(_attention_model(), dims={"seq": (1, 8), "batch": (1, 4)})
    with pytest.raises(GraphError, match="1 <= lower <= upper"):
        tg.compile(_attention_model(), dims={"seq": (0, 8)})


def test_a_computation_that_depends_on_the_dim_otherwise_is_refused_not_guessed():
    # the slice starts at seq - 1: read at the upper bound it would take row 23 at every length
    with pytest.raises(GraphError, match="depend"):
        tg.compile(_attention_model(last_token=True), dims={"seq": (1, UPPER)})


def test_a_graph_built_by_hand_takes_dims_too():
    from tilegraph.graph.builder import GraphBuilder
    from tilegraph.graph.ir import TensorType

    b = GraphBuilder("rows")
    x = b.input("x", TensorType((6, 5), "float32"))
    y = b.add("softmax", [x], {"axis": 0})  # over the run-time axis: rows past it must not count
    g = b.build([y]).replace(dims={"rows": (1, 6)}, input_dims={"x": ("rows", None)}).verify()
    compiled = tg.compile(g)
    x3 = RNG.standard_normal((3, 5)).astype(np.float32)
    e = np.exp(x3 - x3.max(axis=0))
    np.testing.assert_allclose(compiled(x3)[0], e / e.sum(axis=0), rtol=1e-5)
    with pytest.raises(GraphError, match="not an extent of any graph input"):
        g.replace(dims={"rows": (1, 6), "cols": (1, 5)}).verify()


def test_saved_and_loaded_it_keeps_its_dims(attention, tmp_path):
    from tilegraph.graph.serialize import load_model

    model, compiled = attention
    compiled.save(tmp_path / "m.tg")
    loaded = load_model(tmp_path / "m.tg")
    assert loaded.dims == {"seq": (1, UPPER)}
    session = ort.InferenceSession(model.SerializeToString())
    for length in (1, 9, UPPER):
        x = RNG.standard_normal((1, length, 8)).astype(np.float32)
        for e, g in zip(session.run(None, {"x": x}), loaded(x)):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_the_cli_compiles_and_runs_with_a_dim(tmp_path, capsys):
    from tilegraph.cli.main import main

    path = tmp_path / "attention.onnx"
    onnx.save(_attention_model(), path)
    assert main(["compile", str(path), "--dim", "seq=1:24", "-o", str(tmp_path / "a.tg"), "--db",
                 str(tmp_path / "t.db"), "--json"]) == 0
    capsys.readouterr()
    np.save(tmp_path / "x.npy", RNG.standard_normal((1, 5, 8)).astype(np.float32))
    assert main(["run", str(tmp_path / "a.tg"), "--input", f"x={tmp_path / 'x.npy'}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"] == {"attended": [1, 2, 5, 4], "pooled": [1, 2, 1, 4]}
    assert main(["compile", str(path), "--dim", "seq=0:4"]) == 2
    assert "--dim 'seq=0:4'" in capsys.readouterr().err
    assert main(["compile", str(path), "--dim", "seq=1:24", "--expect", "seq=3,x"]) == 2
    assert "--expect 'seq=3,x'" in capsys.readouterr().err
    assert main(["compile", str(path), "--dim", "seq=1:24", "--expect", "seq=30"]) == 2
    assert "[30] of dim seq outside its range [1, 24]" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", RNG.standard_normal((1, 30, 8)).astype(np.float32))
    assert main(["run", str(tmp_path / "a.tg"), "--input", f"x={tmp_path / 'x.npy'}"]) == 2
    assert "outside its range [1, 24]" in capsys.readouterr().err


@pytest.mark.needs_cc
def test_tuned_buckets_dispatch_by_length_and_survive_save_and_load(tmp_path):
    from tilegraph.graph.serialize import load_model
    from tilegraph.graph.tuning import scheduler as tg_scheduler
    from tilegraph.runtime.buckets import BucketedKernel

    model = _attention_model()
    # 5 anchors x 2 buckets: enough trials for every first slice (the default, the neighbour's best,
    # Gensor's 4), so each lower bucket's schedule is a measured choice and gets its own kernel
    trials = 5 * (2 * (tg_scheduler.FIRST_TRIALS + 1) + 1)
    compiled = tg.compile(model, dims={"seq": (1, UPPER)}, buckets={"seq": [8]}, trials=trials,
                          db=str(tmp_path / "t.db"))
    bucketed = [k for k in compiled.kernel_objects if isinstance(k, BucketedKernel)]
    assert bucketed and all(k.ranges == ((1, 8), (9, UPPER)) for k in bucketed)
    assert any("[1, 8]" in row.task for row in compiled.tuning.rows)
    compiled.save(tmp_path / "m.tg")
    session = ort.InferenceSession(model.SerializeToString())
    for candidate in (compiled, load_model(tmp_path / "m.tg")):
        for length in (1, 8, 9, UPPER):
            x = RNG.standard_normal((1, length, 8)).astype(np.float32)
            for e, g in zip(session.run(None, {"x": x}), candidate(x)):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["bert", "gpt2"])
@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_reference_models_exported_with_a_symbolic_length_match_onnxruntime(exported, name, exporter):
    path = exported(name, exporter, small=True, dynamic=True)
    compiled = tg.compile(str(path), dims={"seq": (1, 40)}, orchestration="greedy")
    # a static batch of 1: every reshape keeps its input's storage, a view (no copies added)
    assert not [n.name for n in compiled.graph.nodes if n.op == "reshape_copy"]
    session = ort.InferenceSession(str(path))
    for length in (1, 7, 40):
        ids = RNG.integers(0, 1000, (1, length)).astype(np.int64)
        expected = session.run(None, {"input_ids": ids})[0]
        got = compiled(ids)[0]
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()


@pytest.mark.parametrize("name", ["bert", "gpt2"])
@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_reference_models_over_a_batch_and_a_length_match_onnxruntime(exported, name, exporter):
    """Both exporters merge the batch into the rows of a projection (reshape to batch*seq) or into
    the heads of attention (4*batch): products of dims, the first a copy that packs the rows."""
    path = exported(name, exporter, small=True, dynamic=True, dynamic_batch=True)
    compiled = tg.compile(str(path), dims={"batch": (1, 3), "seq": (1, 9)}, orchestration="greedy")
    assert compiled.dims == {"batch": (1, 3), "seq": (1, 9)}
    session = ort.InferenceSession(str(path))
    for batch, length in ((1, 1), (3, 9), (2, 5), (1, 9), (3, 1)):
        ids = RNG.integers(0, 1000, (batch, length)).astype(np.int64)
        expected = session.run(None, {"input_ids": ids})[0]
        got = compiled(ids)[0]
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max(), (batch, length)


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_convolutional_models_over_a_run_time_batch_match_onnxruntime(exported, name):
    """Convolutions, depthwise ones, pooling, padding and the classifier over a batch of 1..3."""
    path = exported(name, "legacy", small=True, dynamic_batch=True)
    compiled = tg.compile(str(path), dims={"batch": (1, 3)}, orchestration="greedy")
    session = ort.InferenceSession(str(path))
    for batch in (1, 3, 2):
        x = RNG.standard_normal((batch, 3, 64, 64)).astype(np.float32)
        expected = session.run(None, {"pixel_values": x})[0]
        got = compiled(x)[0]
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max(), batch


def test_rows_of_a_batch_of_sequences_are_packed_by_a_copy_not_viewed():
    """x (batch, seq, 4) -> reshape (batch*seq, 4) -> matmul -> reshape (batch, seq, 3): both
    reshapes move elements (a view would read row b*seq + s at b*S + s), so they are computed;
    a reshape splitting the static axis stays a view."""
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph([
        helper.make_node("Reshape", ["x", "rows_shape"], ["rows"]),
        helper.make_node("MatMul", ["rows", "w"], ["product"]),
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Slice", ["x_shape", "zero", "two"], ["batch_seq"]),
        helper.make_node("Concat", ["batch_seq", "three"], ["back_shape"], axis=0),
        helper.make_node("Reshape", ["product", "back_shape"], ["back"]),
        helper.make_node("Reshape", ["back", "split_shape"], ["y"]),
    ], "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 3, 1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([-1, 4], np.int64), "rows_shape"),
         numpy_helper.from_array(np.array([0], np.int64), "zero"), numpy_helper.from_array(np.array([2], np.int64), "two"),
         numpy_helper.from_array(np.array([3], np.int64), "three"),
         numpy_helper.from_array(np.array([0, 0, 3, 1], np.int64), "split_shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = tg.compile(model, dims={"batch": (1, 3), "seq": (1, 6)}, orchestration="greedy")
    ops_by_output = {n.outputs[0]: n.op for n in compiled.graph.nodes}
    assert sorted(op for op in ops_by_output.values() if op.startswith("reshape")) == \
        ["reshape", "reshape_copy", "reshape_copy"]
    for b, n in ((1, 1), (2, 5), (3, 6), (3, 1)):
        x = RNG.standard_normal((b, n, 4)).astype(np.float32)
        (got,) = compiled(x)
        np.testing.assert_allclose(got, (x @ w).reshape(b, n, 3, 1), rtol=1e-5, atol=1e-5)


def test_two_dims_and_their_sum_a_kv_cache_concat():
    """past: float[1, past, 4] and new: float[1, seq, 4] concatenated (a KV cache), reshaped through
    a Shape chain to (1, past + seq, 2, 2), summed over the cache: the reshape's entry is past + seq."""
    nodes = [
        helper.make_node("Concat", ["past", "new"], ["cache"], axis=1),
        helper.make_node("Shape", ["cache"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n1"]),
        helper.make_node("Concat", ["batch", "n1", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["cache", "target"], ["r"]),
        helper.make_node("ReduceSum", ["r", "axis1"], ["total"], keepdims=0),
    ]
    inits = [_const("one", np.int64(1)), _const("axis0", np.array([0], np.int64)),
             _const("axis1", np.array([1], np.int64)), _const("batch", np.array([1], np.int64)),
             _const("heads", np.array([2, 2], np.int64))]
    graph = helper.make_graph(nodes, "kv", [helper.make_tensor_value_info("past", F, [1, "past", 4]),
                                            helper.make_tensor_value_info("new", F, [1, "seq", 4])],
                              [helper.make_tensor_value_info(o, F, None) for o in ("r", "total")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    compiled = tg.compile(model, dims={"past": (1, 12), "seq": (1, 5)})
    assert "past:1:12+seq:1:5" in str(compiled.graph) or "seq:1:5+past:1:12" in str(compiled.graph)
    session = ort.InferenceSession(model.SerializeToString())
    for past, seq in ((1, 1), (12, 5), (7, 2), (3, 5)):
        feeds = {"past": RNG.standard_normal((1, past, 4)).astype(np.float32),
                 "new": RNG.standard_normal((1, seq, 4)).astype(np.float32)}
        for e, g in zip(session.run(None, feeds), compiled.run(feeds).values()):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
