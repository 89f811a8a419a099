"""Prepacked weights in a compiled model (graph/prepack.py): a kernel that packs its weight at every
call gets it packed once at compile time; the model computes what ONNX Runtime computes, bit for bit
what the unpacked model computes, and saves and loads with its packed constants."""

import numpy as np
import pytest

import tilegraph as tg
from tests.lower.test_prepack import packing_schedule
from tilegraph.graph.compile import as_graph
from tilegraph.graph.fusion.partition import partition
from tilegraph.graph.passes import optimize
from tilegraph.graph.tuning.tasks import extract_tasks
from tilegraph.lower.prepack import split_constant_packing
from tilegraph.tune.database import open_database
from tilegraph.tune.database.record import Record

pytestmark = pytest.mark.needs_cc
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

M, K, N = 19, 45, 70


def _model(tmp_path):
    """Two MatMuls of one input by constant weights, a ReLU and an Add."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["x", "v"], ["g"]), helper.make_node("Add", ["r", "g"], ["y"])]
    graph = helper.make_graph(
        nodes, "packed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "v")])
    path = tmp_path / "packed.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def _database_packing_every_matmul(path, tmp_path):
    """A database whose record for each matmul task is a schedule that packs the weight."""
    graph, _ = optimize(as_graph(str(path), None, None))
    db = open_database(str(tmp_path / "t.db"))
    target = tg.Target("cpu")
    for task in extract_tasks(graph, partition(graph, fuse=False)):
        if task.workload.op_name != "matmul":
            continue
        db.commit_workload(task.workload)
        db.commit_record(Record(task.workload.key, str(target.fingerprint),
                                packing_schedule(task.workload).trace.to_json(), "ok", latency_s=1e-6))
    return db


def test_packed_weights_compute_the_model_and_save(tmp_path):
    path = _model(tmp_path)
    db = _database_packing_every_matmul(path, tmp_path)
    x = np.random.default_rng(1).standard_normal((M, K)).astype(np.float32)
    (want,) = ort.InferenceSession(str(path)).run(None, {"x": x})

    packed = tg.compile(str(path), db=db, fuse=False, construct=False)
    plain = tg.compile(str(path), db=db, fuse=False, construct=False, prepack=False)
    assert packed.prepacked and plain.prepacked == ()  # (the graph passes may merge the two MatMuls)
    assert all(name in packed.graph.constants for name in packed.prepacked)
    bound = {n for s in packed.steps for n in s.inputs}
    originals = {name.split(":packed:")[0] for name in packed.prepacked}
    assert set(packed.prepacked) <= bound and not originals & bound  # the steps read the packed copies
    for step in packed.steps:  # no kernel of the model packs a constant operand any more
        kernel = packed.kernel_objects[step.kernel]
        for position, name in enumerate(step.inputs):
            if name in packed.graph.constants:
                param = kernel.lowered.params[position].name
                assert split_constant_packing(kernel.lowered, param, len(kernel.inputs)) is None
    got = packed(x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, plain(x)[0])

    packed.save(tmp_path / "m.tg")
    loaded = tg.load(tmp_path / "m.tg")
    assert {n for s in loaded.steps for n in s.inputs} == bound  # the packed form is what was saved
    assert all(np.array_equal(loaded.graph.constants[n], packed.graph.constants[n]) for n in packed.prepacked)
    np.testing.assert_array_equal(loaded(x)[0], got)
    x2 = np.random.default_rng(2).standard_normal((M, K)).astype(np.float32)
    np.testing.assert_array_equal(loaded(x2)[0], packed(x2)[0])


def test_a_weight_bound_to_a_graph_input_is_not_packed(tmp_path):
    """Only constants are packed once: the same kernel on an input operand keeps its packing."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "two_inputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K]),
                                                    helper.make_tensor_value_info("w", TensorProto.FLOAT, [K, N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "inputs.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    db = _database_packing_every_matmul(path, tmp_path)
    model = tg.compile(str(path), db=db, fuse=False, construct=False)
    assert model.prepacked == ()
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    np.testing.assert_allclose(model(x, w)[0], x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_a_task_marks_its_weights_constant_and_a_plain_record_still_serves(tmp_path):
    """Tasks take the graph's constants as the workload's (tuned as the model runs them: packed once,
    tune/prepacked.py); a record tuned on the operator alone (`tilegraph tune matmul:...`, the plain
    workload) still serves the model."""
    path = _model(tmp_path)
    graph, _ = optimize(as_graph(str(path), None, None))
    tasks = [t for t in extract_tasks(graph, partition(graph, fuse=False)) if t.workload.op_name == "matmul"]
    assert tasks and all(t.workload.constants == (1,) and t.key != t.workload.plain.key for t in tasks)
    db = open_database(str(tmp_path / "plain.db"))
    target = tg.Target("cpu")
    for task in tasks:
        plain = task.workload.plain
        db.commit_record(Record(plain.key, str(target.fingerprint), packing_schedule(plain).trace.to_json(), "ok",
                                latency_s=1e-6))
    model = tg.compile(str(path), db=db, fuse=False, construct=False)
    assert model.prepacked  # the plain records' packing schedules, packed once
    x = np.random.default_rng(4).standard_normal((M, K)).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], ort.InferenceSession(str(path)).run(None, {"x": x})[0], rtol=1e-5,
                               atol=1e-5)


def test_tuning_a_model_records_its_weight_tasks_under_their_constant_keys(tmp_path):
    path = _model(tmp_path)
    graph, _ = optimize(as_graph(str(path), None, None))
    keys = {t.key for t in extract_tasks(graph, partition(graph, fuse=False)) if t.workload.constants}
    db = str(tmp_path / "tuned.db")
    model = tg.compile(str(path), db=db, fuse=False, time_budget=20, trials=4)
    tuned = {r.workload_key for r in open_database(db).records(kind="ok")}
    assert keys and keys <= tuned
    x = np.random.default_rng(5).standard_normal((M, K)).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], ort.InferenceSession(str(path)).run(None, {"x": x})[0], rtol=1e-5,
                               atol=1e-5)


def test_a_matrix_vector_product_reads_its_weights_packed_without_tuning():
    """One row by a constant weight (a decoder's step): Gensor's pick, untuned, packs the weight
    (tune/gensor/state.py's always_packed), the model reads the packed copy, and computes the
    float64 product on odd sizes, the output poisoned first."""
    from tilegraph.graph import GraphBuilder, TensorType

    rng = np.random.default_rng(4)
    k, n = 301, 777  # rows 3108 bytes apart
    weights, bias = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    b = GraphBuilder()
    x = b.input("x", TensorType((1, k), "float32"))
    y = b.add("add", [b.add("matmul", [x, b.constant(weights, "w")]), b.constant(bias, "bias")])
    model = tg.compile(b.build([y]))
    assert model.prepacked and all(name.startswith("w:packed:") for name in model.prepacked)
    for _ in range(2):
        model.tensor_view(model.graph.outputs[0])[...] = np.nan
        a = rng.standard_normal((1, k)).astype(np.float32)
        np.testing.assert_allclose(model(a)[0], a.astype(np.float64) @ weights + bias, rtol=1e-4, atol=1e-4)
