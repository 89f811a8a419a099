"""TuneSession.measure_kernel: a kernel built outside a schedule, checked, timed and recorded once."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.errors import ScheduleError
from tilegraph.schedule import Schedule
from tilegraph.tune.database import MemoryDatabase, SQLiteDatabase, built_kernels_fingerprint
from tilegraph.tune.measure import MeasurePolicy, random_inputs
from tilegraph.tune.session import TuneSession, built_kernel_trace

pytestmark = pytest.mark.needs_cc
POLICY = MeasurePolicy(warmup=1, min_time_s=0.005, min_repeats=3, num_threads=1)


def _matmul():
    wl = workloads.from_spec("matmul:5,7,3")
    kernel = tg.build(wl)
    inputs = random_inputs(wl, 3)
    reference = [inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)]
    return wl, kernel, inputs, reference


def _never():
    raise AssertionError("check data made for a recorded kernel")


def test_a_built_kernel_is_measured_once_and_recorded(tune_dirs):
    wl, kernel, inputs, reference = _matmul()
    db = MemoryDatabase()
    with TuneSession("cpu", db, policy=POLICY, progress=False) as session:
        first = session.measure_kernel(wl, kernel, lambda: (inputs, reference), meta={"nodes": ["mm"]})
        again = session.measure_kernel(wl, kernel, _never)  # recorded: its check data is not even made
        assert first.ok and first.latency_s > 0 and session.measured == 1
        assert again.trace_hash == first.trace_hash and again.created == first.created
    assert db.records(wl.key, str(tg.Target("cpu").fingerprint)) == []  # kept apart from the schedules
    (record,) = db.records(wl.key)
    assert record.meta == {"source": "orchestration", "nodes": ["mm"]} and record.policy["num_threads"] == 1
    with pytest.raises(ScheduleError, match="does not replay"):
        Schedule.replay(wl, record.trace_json)
    assert db.best_schedule(wl) is None  # a measurement record is never taken for a schedule


def test_a_wrong_kernel_is_a_failed_record(tune_dirs):
    wl, kernel, inputs, reference = _matmul()
    db = MemoryDatabase()
    with TuneSession("cpu", db, policy=POLICY, progress=False) as session:
        record = session.measure_kernel(wl, kernel, lambda: (inputs, [reference[0] + 1.0]))
    assert record.kind == "wrong_answer" and db.records(wl.key)[0].kind == "wrong_answer"


def test_a_wrong_answer_from_an_older_check_is_checked_again(tune_dirs):
    """A verdict the check has since relaxed (one bfloat16 ulp) does not refuse the binary for good;
    one from the current check is final (its check data is not even made)."""
    import dataclasses

    from tilegraph.tune.measure import CHECK_VERSION

    wl, kernel, inputs, reference = _matmul()
    db = MemoryDatabase()
    with TuneSession("cpu", db, policy=POLICY, progress=False) as session:
        wrong = session.measure_kernel(wl, kernel, lambda: (inputs, [reference[0] + 1.0]))
        assert wrong.kind == "wrong_answer" and wrong.meta["check"] == CHECK_VERSION
        assert session.measure_kernel(wl, kernel, _never).kind == "wrong_answer"
        db.replace_record(dataclasses.replace(wrong, meta={**wrong.meta, "check": CHECK_VERSION - 1}))
        again = session.measure_kernel(wl, kernel, lambda: (inputs, reference))
    assert again.ok and [r.kind for r in db.records(wl.key)] == ["ok"]


def test_built_kernel_records_survive_export_and_import(tune_dirs, tmp_path):
    wl, kernel, inputs, reference = _matmul()
    db = SQLiteDatabase(tmp_path / "a.db")
    with TuneSession("cpu", db, policy=POLICY, progress=False) as session:
        session.measure_kernel(wl, kernel, lambda: (inputs, reference))
    db.export_jsonl(tmp_path / "a.jsonl")
    other = SQLiteDatabase(tmp_path / "b.db")
    assert other.import_jsonl(tmp_path / "a.jsonl") == 1
    trace = built_kernel_trace(wl.key, kernel, 1)
    assert other.record(wl.key, built_kernels_fingerprint(str(tg.Target("cpu").fingerprint)), trace) is not None
