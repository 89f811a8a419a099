"""Whole-model tuning end to end: tg.compile with a budget tunes the tasks, builds from the
records, matches the reference; killed mid-way (SIGKILL), a rerun continues and re-measures nothing."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.tune.database import open_database

pytestmark = [pytest.mark.needs_cc, pytest.mark.extended]  # long: in CI's extended run, not the default one


def two_conv_blocks():
    """x -> conv3x3 + bias + relu -> conv1x1 + bias + residual add -> relu (NHWC); two tasks."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("blocks")
    x = b.input("x", TensorType((1, 9, 9, 8), "float32"))

    def conv(v, k, cin, cout, pad):
        w = b.constant((rng.standard_normal((k, k, cin, cout)) * 0.3).astype(np.float32))
        bias = b.constant(rng.standard_normal(cout).astype(np.float32))
        # the bias as its own node, as the ONNX frontend's passes leave it: an epilogue of the conv
        return b.add("add", [b.add("conv2d", [v, w], {"layout": "NHWC", "pads": (pad,) * 4}), bias])

    h = b.add("relu", [conv(x, 3, 8, 8, 1)])
    y = b.add("relu", [b.add("add", [conv(h, 1, 8, 8, 0), x])])
    return b.build([y]), {"x": rng.standard_normal((1, 9, 9, 8)).astype(np.float32)}


def _records(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("select count(*) from records").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def _measured_twice(path):
    db = open_database(path, readonly=True)
    seen = Counter((r.workload_key, r.trace_hash) for r in db.records())
    db.close()
    return [k for k, n in seen.items() if n > 1]


def test_compile_with_a_budget_tunes_every_task_and_matches_the_reference(tmp_path):
    graph, feeds = two_conv_blocks()
    model = tg.compile(graph, db=tmp_path / "t.db", trials=12, orchestration="greedy")
    report = model.tuning
    assert len(report.rows) == 2 and report.measured_now == 12
    assert all(r.before_s and r.after_s and r.after_s <= r.before_s for r in report.rows)
    assert abs(sum(r.share for r in report.rows) - 1) < 1e-9 and all(r.gflops > 0 for r in report.rows)
    assert all(model.tuned)  # both kernels built from the records the tuning left
    (out,) = model(feeds["x"])
    (ref,) = run_reference(graph, feeds).values()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    table = report.table()
    assert "conv2d 1x9x9x8 . 3x3x8x8" in table and "12 measured now" in table
    assert report.to_json()["model"]["measured"] == 12


_KILLED_RUN = """
import sys
import tilegraph as tg
from tests.graph.tuning.test_tune_model import two_conv_blocks
graph, _ = two_conv_blocks()
tg.compile(graph, db=sys.argv[1], trials=int(sys.argv[2]), orchestration="greedy")
"""


def test_a_killed_tuning_resumes_without_remeasuring_and_converges_on_the_same_kernels(tmp_path):
    db, trials = tmp_path / "resume.db", 16
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(db), str(trials)], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if db.exists() and _records(db) >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _records(db)
    assert 4 <= before < trials

    graph, feeds = two_conv_blocks()
    resumed = tg.compile(graph, db=db, trials=trials, orchestration="greedy")
    assert resumed.tuning.measured == trials and resumed.tuning.measured_now == trials - before
    assert _measured_twice(db) == []

    again = tg.compile(graph, db=db, trials=trials, orchestration="greedy")
    assert again.tuning.measured_now == 0 and _records(db) == trials
    assert again.kernel_keys == resumed.kernel_keys
    best = {r.key: r.after_s for r in resumed.tuning.rows}
    assert {r.key: r.after_s for r in again.tuning.rows} == best
    np.testing.assert_array_equal(again(feeds["x"])[0], resumed(feeds["x"])[0])


def test_budget_arguments_are_checked():
    graph, _ = two_conv_blocks()
    with pytest.raises(tg.GraphError, match="trials"):
        tg.compile(graph, trials=-1)
    with pytest.raises(tg.GraphError, match="time_budget"):
        tg.compile(graph, time_budget=-5)
