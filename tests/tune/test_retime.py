"""Settling a task's best (tune/retime.py): the few fastest records timed again against each other in
alternating rounds, and recorded so. A fake runner gives each trace its true latency; the records
carry luckier ones."""

import pytest

import tilegraph as tg
from tests.tune.helpers import matmul_workload
from tilegraph.tune.database import SQLiteDatabase
from tilegraph.tune.database.record import Record
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.result import BuildResult, RunResult
from tilegraph.tune.retime import retime_best

FP = "fp"


class FakeBuilder:
    def build(self, inputs):
        return [BuildResult(True, message=i.trace_json) for i in inputs]


class FakeRunner:
    """True latency per trace (a RunResult kind instead: that verdict now); the order of runs kept."""

    def __init__(self, truth):
        self.truth, self.order, self.policy = truth, [], MeasurePolicy()

    def run(self, wl, build, seed=0, timeout_s=None, best_s=None):
        self.order.append(build.message)
        got = self.truth[build.message]
        return RunResult(got) if isinstance(got, str) else RunResult("ok", samples=(got,) * 5)


@pytest.fixture
def db(tmp_path):
    return SQLiteDatabase(tmp_path / "t.db")


def _record(wl, trace, latency):
    return Record(wl.key, FP, trace, "ok", latency_s=latency, samples=(latency,) * 5)


def _best(db, wl):
    return db.best(wl.key, FP).trace_json


def test_a_lucky_record_loses_to_the_one_that_is_faster_when_timed_alternately(db):
    wl = matmul_workload(8)
    for trace, recorded in (("lucky", 0.10), ("steady", 0.12), ("third", 0.2), ("slow", 0.5)):
        db.commit_record(_record(wl, trace, recorded))
    runner = FakeRunner({"lucky": 0.30, "steady": 0.15, "third": 0.25, "slow": 0.5})
    settled = retime_best(db, FakeBuilder(), runner, wl, FP, k=3, rounds=3)
    assert [r.trace_json for r in settled] == ["steady", "third", "lucky"]
    assert _best(db, wl) == "steady" and db.best(wl.key, FP).latency_s == pytest.approx(0.15)
    assert all(r.meta["retimed"] == 3 and "recorded_s" in r.meta for r in settled)
    assert "slow" not in runner.order  # only the k best
    rounds = [runner.order[i:i + 3] for i in range(0, 9, 3)]
    assert [r[0] for r in rounds] == ["lucky", "steady", "third"]  # the order rotates between rounds


def test_an_unsettled_record_that_becomes_the_best_is_settled_too(db):
    wl = matmul_workload(8)
    for trace, recorded in (("a", 0.10), ("b", 0.11), ("c", 0.12), ("d", 0.13)):
        db.commit_record(_record(wl, trace, recorded))
    runner = FakeRunner({"a": 0.40, "b": 0.40, "c": 0.40, "d": 0.2})
    retime_best(db, FakeBuilder(), runner, wl, FP, k=3, rounds=2)
    best = db.best(wl.key, FP)
    assert best.trace_json == "d" and best.meta.get("retimed") == 2


def test_a_kernel_that_fails_now_is_recorded_failed_and_a_timeout_changes_nothing(db):
    wl = matmul_workload(8)
    for trace, recorded in (("wrong", 0.10), ("hung", 0.11), ("good", 0.12)):
        db.commit_record(_record(wl, trace, recorded))
    runner = FakeRunner({"wrong": "wrong_answer", "hung": "timeout", "good": 0.2})
    retime_best(db, FakeBuilder(), runner, wl, FP, k=3, rounds=3)
    by_trace = {r.trace_json: r for r in db.records(wl.key, FP)}
    assert by_trace["wrong"].kind == "wrong_answer"
    assert by_trace["hung"].kind == "ok" and by_trace["hung"].latency_s == 0.11 and "retimed" not in by_trace["hung"].meta
    assert by_trace["good"].latency_s == pytest.approx(0.2)
    assert runner.order.count("wrong") == 1  # a failed candidate is not run again


def test_one_record_or_a_deadline_already_passed_settles_nothing(db):
    wl = matmul_workload(8)
    db.commit_record(_record(wl, "only", 0.1))
    runner = FakeRunner({"only": 0.3})
    assert retime_best(db, FakeBuilder(), runner, wl, FP) == [] and runner.order == []
    db.commit_record(_record(wl, "second", 0.2))
    assert retime_best(db, FakeBuilder(), runner, wl, FP, deadline=0.0) == [] and runner.order == []


def test_tg_tune_with_a_time_budget_settles_its_best(tune_dirs):
    wl = matmul_workload(16)
    db_path = tune_dirs / "t.db"
    # 10 s: settling gets 1 s, ten times the half round it needs, so a slow build past the search's
    # deadline on a loaded machine still leaves it room
    result = tg.tune(wl, strategy="random", time_budget=10, db=str(db_path), seed=0, progress=False,
                     policy=MeasurePolicy(min_time_s=0.01, min_repeats=3))
    best = SQLiteDatabase(db_path).best(wl.key, tg.Target("cpu").fingerprint)
    assert best.meta.get("retimed", 0) >= 1 and result.latency_s == best.latency_s
