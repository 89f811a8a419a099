"""Constructed schedules: tasks without a tuning record get Gensor's pick (no measurement, nothing
recorded), their kernels compute what the graph means, and a record always wins."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph.compile import as_graph
from tilegraph.graph.construct import CONSTRUCT_MIN_FLOPS, CONSTRUCTED, WithConstructed, construct_schedules
from tilegraph.graph.fusion.partition import partition
from tilegraph.graph.passes import optimize
from tilegraph.graph.tuning.tasks import extract_tasks
from tilegraph.tune.database import open_database
from tilegraph.tune.database.record import Record

pytestmark = pytest.mark.needs_cc
onnx = pytest.importorskip("onnx")

BIG, SMALL = (96, 160, 128), (4, 6, 8)  # 96x160 . 160x128: 3.9 MFLOP (constructed); 4x6 . 6x8: tiny


def _model(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    m, k, n = BIG
    sm, sk, sn = SMALL
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
             helper.make_node("MatMul", ["u", "v"], ["z"])]
    graph = helper.make_graph(
        nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k]),
                       helper.make_tensor_value_info("u", TensorProto.FLOAT, [sm, sk])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal((sk, sn)).astype(np.float32), "v")])
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def _tasks(path):
    graph, _ = optimize(as_graph(str(path), None, None))
    return extract_tasks(graph, partition(graph, fuse=True))


def test_only_tasks_worth_it_and_without_a_record_are_constructed(tmp_path):
    tasks = _tasks(_model(tmp_path))
    target = tg.Target("cpu")
    big = [t for t in tasks if t.workload.flops() >= CONSTRUCT_MIN_FLOPS]
    assert len(big) == 1 and len(tasks) == 2
    constructed = construct_schedules(tasks, target)
    assert set(constructed) == {big[0].workload.key}
    db = open_database(str(tmp_path / "t.db"))  # a record of the big task: nothing to construct
    db.commit_workload(big[0].workload)
    db.commit_record(Record(big[0].workload.key, str(target.fingerprint), constructed[big[0].workload.key], "ok",
                            latency_s=1e-3))
    assert construct_schedules(tasks, target, db) == {}
    # the overlay: own records first, the constructed schedule where there is none
    view = WithConstructed(db, {"nokey": constructed[big[0].workload.key]})
    assert view.top_k(big[0].workload.key, str(target.fingerprint), 2)[0].latency_s == 1e-3
    (made,) = view.top_k("nokey", str(target.fingerprint), 2)
    assert made.meta["strategy"] == CONSTRUCTED and view.top_k("nokey", "fp", 0) == []
    assert view.records(big[0].workload.key) == db.records(big[0].workload.key)  # the rest is the database's
    from tilegraph.graph.fusion.measure import _costs_database

    assert _costs_database(view) is db  # BLP's measured costs go to the compile's own database


@pytest.mark.parametrize("spec,worth", [
    ("softmax:1536,128", True), ("layer_norm:128,768", True), ("matmul:16,64,128", True),  # small models' tasks
    ("depthwise_conv2d_nhwc:1,7,7,96,3,1,1", True),
    ("softmax:8,8", False), ("matmul:4,6,8", False)])                     # under CONSTRUCT_MIN_FLOPS
def test_contractions_and_row_operators_are_constructed_from_a_small_size(spec, worth):
    from tilegraph.graph.construct import CONSTRUCT_MIN_OTHER_FLOPS, worth_constructing
    from tilegraph.workloads import from_spec

    wl = from_spec(spec)
    assert wl.flops() < CONSTRUCT_MIN_OTHER_FLOPS
    assert (wl.flops() >= CONSTRUCT_MIN_FLOPS) is worth
    assert worth_constructing(wl) is worth


@pytest.mark.parametrize("spec", ["max_pool2d:1,56,56,64,3,2,1", "mean:1,49,2048"])
def test_other_anchors_wait_for_the_larger_size(spec):
    """Pooling and reductions over outer axes: the plain schedule served them as well or better."""
    from tilegraph.graph.construct import CONSTRUCT_MIN_OTHER_FLOPS, worth_constructing
    from tilegraph.workloads import from_spec

    wl = from_spec(spec)
    assert CONSTRUCT_MIN_FLOPS <= wl.flops() < CONSTRUCT_MIN_OTHER_FLOPS
    assert not worth_constructing(wl)


def test_a_batch_one_convolution_with_a_bias_is_constructed(tmp_path):
    """Its bias add reads the convolution at batch index 0 (a broadcast of the size-1 dimension);
    reverse_compute_at once refused that, so no Gensor state built and the compile silently kept
    the plain default schedule (10x slower on a YOLO-style detector's convolutions)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    (task,) = _tasks(path)
    assert set(construct_schedules([task], tg.Target("cpu"))) == {task.workload.key}
    model = tg.compile(str(path), orchestration="greedy")
    assert len(model.constructed) == 1
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-4)


def test_a_constructed_row_kernel_is_correct(tmp_path):
    """A softmax task of 0.4 MFLOP gets Gensor's row kernel, and it computes softmax."""
    from tilegraph.graph.construct import construct_one
    from tilegraph.schedule.schedule import Schedule
    from tilegraph.testing import random_inputs, reference_outputs
    from tilegraph.workloads import from_spec

    wl = from_spec("softmax:600,200")
    trace = construct_one(wl, tg.Target("cpu"))
    assert trace is not None and "rfactor" in trace  # the row kernel's vector partial results
    kernel = tg.build(Schedule.replay(wl, trace))
    inputs = random_inputs(wl, 3)
    (ref,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(kernel(*inputs), ref, rtol=1e-5, atol=1e-6)


def test_a_compile_without_budget_builds_constructed_kernels_that_are_correct(tmp_path):
    path = _model(tmp_path)
    db_path = tmp_path / "empty.db"
    open_database(str(db_path)).close()
    model = tg.compile(str(path), db=str(db_path), orchestration="greedy")
    assert len(model.constructed) == 1 and not any(model.tuned)
    assert "1 constructed by Gensor" in model.summary()
    assert open_database(str(db_path)).records() == []  # nothing measured, nothing recorded
    rng = np.random.default_rng(3)
    x = rng.standard_normal(BIG[:2]).astype(np.float32)
    u = rng.standard_normal(SMALL[:2]).astype(np.float32)
    w, v = (onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer)
    y, z = model(x, u)
    np.testing.assert_allclose(y, np.maximum(x.astype(np.float64) @ w, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(z, u.astype(np.float64) @ v, rtol=1e-5, atol=1e-5)
    plain = tg.compile(str(path), orchestration="greedy", construct=False)
    assert plain.constructed == () and plain.kernel_keys == model.kernel_keys
    np.testing.assert_allclose(plain(x, u)[0], y, rtol=1e-4, atol=1e-4)


def test_a_remeasured_hardware_model_constructs_again(tmp_path, monkeypatch):
    """Picks follow the hardware model's numbers: a model measured again (`tilegraph info
    --remeasure`, a new probe) must not be served the picks made under the numbers it replaced."""
    from tilegraph.tune import hardware
    from tilegraph.tune.strategy.gensor import GensorStrategy

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    calls = []
    propose = GensorStrategy.propose
    monkeypatch.setattr(GensorStrategy, "propose", lambda self, ctx, n: calls.append(1) or propose(self, ctx, n))
    tasks, target = _tasks(_model(tmp_path)), tg.Target("cpu")
    nominal = hardware.hardware_model(target, measure=False)
    for l2 in (50e9, 50e9, 140e9):  # the same numbers read the cache; new ones construct again
        model = hardware.HardwareModel(**{**nominal.__dict__, "bandwidth_bytes": {**nominal.bandwidth_bytes, "l2": l2}})
        monkeypatch.setattr(hardware, "hardware_model", lambda *a, m=model, **k: m)
        assert len(construct_schedules(tasks, target, workers=1)) == 1
    assert len(calls) == 2


def test_a_construction_that_fails_leaves_the_default_schedule(tmp_path, monkeypatch):
    from tilegraph.tune.strategy.gensor import GensorStrategy

    def broken(self, ctx, n):
        raise RuntimeError("a bug in the walk")

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))  # nothing cached: the walk must run
    monkeypatch.setattr(GensorStrategy, "propose", broken)
    path = _model(tmp_path)
    assert construct_schedules(_tasks(path), tg.Target("cpu")) == {}
    model = tg.compile(str(path), orchestration="greedy")  # compiles, with the plain schedules
    assert model.constructed == ()
