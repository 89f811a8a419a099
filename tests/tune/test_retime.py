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
from tilegraph.tune.retime import SETTLE_SHARE, retime_best

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


def test_tg_tune_with_a_time_budget_settles_its_best(tune_dirs, monkeypatch):
    """The wiring, not the clock: the search gets the budget less SETTLE_SHARE, settling is asked to
    end with the budget, and the kernel returned is the database's best after it. Settling is run
    here without its deadline, so that a loaded machine whose search overran (a batch of builds in
    flight at its deadline) still settles, and the test asserts no timing."""
    from tilegraph.tune.session import TuneSession

    calls = {}
    slice_of, settle = TuneSession.tune_slice, TuneSession.retime_best

    def spy_slice(self, wl, search, limit, deadline, **kw):
        calls["search_until"] = deadline
        return slice_of(self, wl, search, limit, deadline, **kw)

    def spy_settle(self, wl, deadline=None, **kw):
        calls["settle_until"] = deadline
        return settle(self, wl, **kw)

    monkeypatch.setattr(TuneSession, "tune_slice", spy_slice)
    monkeypatch.setattr(TuneSession, "retime_best", spy_settle)
    wl = matmul_workload(16)
    db_path = tune_dirs / "t.db"
    policy = MeasurePolicy(min_time_s=0.01, min_repeats=3)
    # records to settle however few the timed search gets in on a loaded machine (a trial limit
    # and no time budget: no settling)
    tg.tune(wl, strategy="random", trials=4, db=str(db_path), seed=1, progress=False, policy=policy)
    assert "settle_until" not in calls
    result = tg.tune(wl, strategy="random", time_budget=4, db=str(db_path), seed=0, progress=False,
                     policy=policy)
    assert calls["settle_until"] - calls["search_until"] == pytest.approx(SETTLE_SHARE * 4)
    db = SQLiteDatabase(db_path)
    fp = tg.Target("cpu").fingerprint
    assert sum(r.meta.get("retimed", 0) >= 1 for r in db.records(wl.key, fp)) >= 2
    assert result.latency_s == db.best(wl.key, fp).latency_s
