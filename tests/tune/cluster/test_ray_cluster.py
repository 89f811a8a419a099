"""Tuning on a real two-node Ray cluster on this machine (ray.cluster_utils: each node its own
raylet and workers): candidates spread over both nodes' runners, a small model compiles over it,
and a mismatched or missing cluster is one clear error. A node killed mid-run:
test_ray_start_cli.py (nodes started with `ray start`, as a user starts them)."""

import os
import sqlite3
from pathlib import Path

import pytest

import tilegraph as tg
from tests.tune.helpers import matmul_workload
from tilegraph.tune import MeasurePolicy
from tilegraph.tune.cluster import ClusterError
from tilegraph.tune.database import SQLiteDatabase
from tilegraph.tune.database.record import Record

ray = pytest.importorskip("ray", reason="Ray is an extra (tilegraph[ray])")
pytestmark = [pytest.mark.needs_cc, pytest.mark.needs_ray, pytest.mark.extended]

FAST = MeasurePolicy(min_time_s=0.002, min_repeats=3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and a second node, one CPU each; the workers inherit a private cache folder."""
    from ray.cluster_utils import Cluster

    folder = tmp_path_factory.mktemp("ray")
    saved = {k: os.environ.get(k) for k in ("TILEGRAPH_CACHE_DIR", "TILEGRAPH_DATA_DIR")}
    os.environ["TILEGRAPH_CACHE_DIR"] = str(folder / "cache")
    os.environ["TILEGRAPH_DATA_DIR"] = str(folder / "data")
    try:
        made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        made.add_node(num_cpus=1)
        made.wait_for_nodes()
    except Exception as e:  # no shared memory, no ports, ...: the environment, not tilegraph
        pytest.skip(f"a local Ray cluster could not start here: {type(e).__name__}: {e}")
    ray.init(address=made.address, logging_level="error", log_to_driver=False)
    yield made
    ray.shutdown()
    made.shutdown()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _records(path, workload) -> list[Record]:
    return list(SQLiteDatabase(path).records(workload.key, tg.Target("cpu").fingerprint))


def _sound(path) -> None:
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_candidates_spread_over_both_nodes(cluster, tmp_path, monkeypatch):
    from tilegraph.tune.cluster.runner import RayRunner

    measured_on: list[str] = []  # the node of every measurement, confirmations of a new best included
    real_batch = RayRunner.run_batch

    def spying(self, items):
        results = real_batch(self, items)
        measured_on.extend(r.node for r in results)
        return results

    monkeypatch.setattr(RayRunner, "run_batch", spying)
    wl = matmul_workload(8)
    db = tmp_path / "t.db"
    result = tg.tune(wl, strategy="random", trials=8, db=str(db), seed=1, progress=False, policy=FAST,
                     cluster=cluster.address)
    records = _records(db, wl)
    assert result.measured == 8 and len(records) == 8
    assert len({r.trace_json for r in records}) == 8
    assert all(r.kind == "ok" for r in records)
    assert len(set(measured_on)) == 2  # each runner took candidates (both start idle)
    # A record names the node of the measurement it keeps: a new best is measured twice (on either
    # runner) and keeps the slower, so which node a record names is not the test's business.
    assert {r.meta["node"] for r in records} <= set(measured_on)
    _sound(db)
    # the runners removed each library they wrote once its candidate was measured
    assert not list((Path(os.environ["TILEGRAPH_CACHE_DIR"]) / "cluster").glob("*.so"))


def test_each_node_gets_one_runner_with_its_fingerprint_and_calibration(cluster):
    from tilegraph.tune.cluster import connect
    from tilegraph.tune.cluster.runner import RayRunner

    runner = RayRunner(connect(cluster.address), FAST)
    try:
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert runner.slots == len(alive) and set(runner.nodes) == alive
        for info in runner.runners:
            assert info["target"] == tg.Target("cpu").fingerprint and info["calibration_gflops"] > 0
        assert not runner.skipped
    finally:
        runner.close()


def test_no_matching_runner_is_one_line(cluster, monkeypatch):
    from tilegraph.tune.cluster import connect
    from tilegraph.tune.cluster import runner as cluster_runner

    real = cluster_runner.node_fingerprint
    monkeypatch.setattr(cluster_runner, "node_fingerprint", lambda t: {**real(t), "tilegraph": "0.0-other"})
    with pytest.raises(ClusterError, match=r"no runner on the cluster matches target cpu-.* on machine cpu-.*node\(s\)"):
        cluster_runner.RayRunner(connect(cluster.address), FAST)


def test_an_unreachable_cluster_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: (_ for _ in ()).throw(ConnectionError("no cluster\nmore")))
    with pytest.raises(ClusterError, match=r"could not connect to the Ray cluster at 'ray://nowhere:1': no cluster$"):
        tg.tune(matmul_workload(8), trials=1, db=str(tmp_path / "t.db"), progress=False, cluster="ray://nowhere:1")


def _mlp_onnx():
    import numpy as np

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {"w1": rng.standard_normal((24, 40)) / 5, "b1": rng.standard_normal(40), "w2": rng.standard_normal((40, 16)) / 6}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(a, np.float32), n) for n, a in weights.items()])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), weights


def test_a_small_model_tuned_on_the_cluster_matches_numpy(cluster, tmp_path):
    import numpy as np

    proto, w = _mlp_onnx()
    db = tmp_path / "t.db"
    model = tg.compile(proto, db=str(db), trials=6, cluster=cluster.address)
    x = np.random.default_rng(1).standard_normal((12, 24)).astype(np.float32)
    got = model.run({"x": x})["y"]
    want = np.maximum(x.astype(np.float64) @ w["w1"] + w["b1"], 0) @ w["w2"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with sqlite3.connect(db) as con:  # the tasks' tuning records; the orchestration times its fusion choices here
        nodes = [row[0] for row in con.execute("SELECT json_extract(meta, '$.node') FROM records "
                                                "WHERE json_extract(meta, '$.source') IS NOT 'orchestration'")]
    assert nodes and None not in nodes  # every tuning record was measured on the cluster
    _sound(db)


def test_cli_tunes_over_the_cluster(cluster, tmp_path, capsys):
    import json

    from tilegraph.cli.main import main

    db = tmp_path / "t.db"
    code = main(["tune", "matmul:8,16,8", "--trials", "4", "--strategy", "random", "--db", str(db), "--json",
                 "--cluster", cluster.address])
    assert code == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["measured"] == 4 and row["failed"] == 0
    assert ray.is_initialized()  # the CLI joined this process's connection and left it open


def test_every_runner_lost_stops_with_one_line_and_records_nothing_of_the_batch(cluster, tmp_path):
    from tilegraph.tune.cluster import connect
    from tilegraph.tune.cluster.runner import RayRunner

    runner = RayRunner(connect(cluster.address), FAST)
    for actor in list(runner.actors):
        ray.kill(actor)
    db = tmp_path / "t.db"
    with pytest.raises(ClusterError, match="every runner on the cluster was lost"):
        tg.tune(matmul_workload(8), strategy="random", trials=4, db=str(db), progress=False, policy=FAST,
                runner=runner, cluster=cluster.address)
    assert not db.exists() or _records(db, matmul_workload(8)) == []
    runner.close()
