"""graph/tuning/report.py and vendor.py: the per-task table, its JSON, PyTorch's time per task."""

import json

import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.graph.tuning.report import build_report
from tilegraph.graph.tuning.scheduler import TaskScheduler
from tilegraph.graph.tuning.vendor import vendor_time

from .test_scheduler import Clock, Done, FakeSession, model_tasks


def _report(monkeypatch):
    from tilegraph.graph.tuning import scheduler as sched

    clock = Clock()
    monkeypatch.setattr(sched.time, "monotonic", clock)
    tasks = model_tasks()
    session = FakeSession({t.key: [1e-3 / (1 + k) for k in range(50)] for t in tasks}, clock)
    s = TaskScheduler(tasks, session, trials=20, slice_strategy=lambda t, g: Done()).run()
    return build_report(s, threads=2, peak_flops=100e9), tasks


def test_rows_shares_and_totals(monkeypatch):
    report, tasks = _report(monkeypatch)
    assert [r.key for r in report.rows] == [t.key for t in tasks]
    assert abs(sum(r.share for r in report.rows) - 1) < 1e-12
    big = report.rows[0]
    assert big.occurrences == 3 and big.before_s == 1e-3 and big.after_s < big.before_s
    assert big.gflops == pytest.approx(tasks[0].flops / big.after_s / 1e9)
    assert big.peak_pct == pytest.approx(big.gflops / 100 * 100)
    assert report.tasks_before_s == pytest.approx(sum(t.weight * 1e-3 for t in tasks))
    assert report.measured == report.measured_now == 20


def test_table_and_json(monkeypatch):
    report, tasks = _report(monkeypatch)
    lines = report.table().splitlines()
    assert lines[0].split()[:3] == ["task", "occ", "share"] and len(lines) == 2 + len(tasks)
    assert lines[1].startswith("matmul 16x64 . 64x64")  # the largest share first
    assert "20 measured now, 20 recorded" in lines[-1] and "trial budget spent" in lines[-1]
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["model"]["tasks"] == 3 and len(doc["tasks"]) == 3
    assert {"task", "occurrences", "share", "before_s", "after_s", "gflops", "peak_pct", "measured", "vendor_s",
            "speedup"} <= set(doc["tasks"][0])


def test_vendor_times_where_pytorch_has_the_op(monkeypatch):
    pytest.importorskip("torch")
    report, tasks = _report(monkeypatch)
    report.add_vendor_times(threads=1)
    assert all(r.vendor == "torch" and r.vendor_s > 0 for r in report.rows)  # matmul, matmul, softmax
    assert "vs torch" in report.table()
    x = te.placeholder((3,), name="X")
    hand = tg.Workload([x], [te.compute((3,), lambda i: x[i] * 3.0, name="Y")])
    seconds, note = vendor_time("torch", hand, 1)
    assert seconds is None and "no equivalent" in note
