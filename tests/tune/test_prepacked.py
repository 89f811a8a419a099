"""Candidates of a workload with constant inputs are built and timed as a compiled model runs them
(tune/prepacked.py): a schedule that packs a constant input is built as its packing and the rest,
the runner packs once per check, untimed, and the check still compares against the float64
reference of the original inputs."""

from dataclasses import replace

import numpy as np
import pytest

import tilegraph as tg
from tests.lower.test_prepack import packing_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.tune.builder import build_candidate
from tilegraph.tune.cluster.remote import discarded, materialised, with_library
from tilegraph.tune.database import SQLiteDatabase
from tilegraph.tune.database.record import Record
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.runner import Runner
from tilegraph.workloads import from_spec

pytestmark = pytest.mark.needs_cc
FAST = MeasurePolicy(min_time_s=0.002, min_repeats=3)


def _weights(spec: str = "matmul:37,53,91") -> tg.Workload:
    plain = from_spec(spec)
    return tg.Workload(plain.inputs, plain.outputs, constants=[1])


def _trace(wl, packs: bool = True) -> str:
    sch = packing_schedule(wl) if packs else Schedule(wl)
    return sch.trace.to_json()


@pytest.mark.parametrize("spec", ["matmul:37,53,91", "matmul:1,7,5"])
def test_a_packing_schedule_of_a_constant_input_is_built_split_and_checked(spec, tune_dirs):
    wl = _weights(spec)
    build = build_candidate(wl, _trace(wl), "cpu", 60.0)
    assert build.ok and build.prepack is not None
    position, packing = build.prepack
    assert position == 1 and packing.ok
    assert [a.is_output for a in packing.args] == [False, True] and packing.args[0] == build.args[1]
    assert build.input_buffers[1].name == packing.output_buffers[0].name  # the rest reads the packed copy
    with Runner(FAST) as runner:
        result = runner.run(wl, build, seed=5)
    assert result.kind == "ok", result.message
    assert "prepack" in result.stages and len(result.samples) >= FAST.min_repeats


def test_without_constants_or_without_packing_the_kernel_is_built_whole(tune_dirs):
    wl = _weights()
    unpacked = build_candidate(wl, _trace(wl, packs=False), "cpu", 60.0)
    whole = build_candidate(wl.plain, _trace(wl.plain), "cpu", 60.0)
    assert unpacked.ok and unpacked.prepack is None
    assert whole.ok and whole.prepack is None
    with Runner(FAST) as runner:
        assert runner.run(wl, unpacked, seed=1).ok and runner.run(wl.plain, whole, seed=1).ok


def test_a_wrong_packing_kernel_fails_the_check(tune_dirs):
    """The check runs the packed path: a packing kernel that writes another layout is caught."""
    wl = _weights()
    build = build_candidate(wl, _trace(wl), "cpu", 60.0)
    # slabs of 8 columns (12 of them) where the rest reads slabs of 16 (6): the same size, other places
    eights = build_candidate(wl, packing_schedule(wl, block_split=8).trace.to_json(), "cpu", 60.0)
    assert eights.prepack[1].output_buffers[0].shape == build.prepack[1].output_buffers[0].shape
    broken = replace(build, prepack=(1, eights.prepack[1]))
    with Runner(FAST) as runner:
        assert runner.run(wl, broken, seed=2).kind == "wrong_answer"


def test_tuning_a_constant_workload_records_under_its_own_key(tune_dirs):
    wl = _weights("matmul:24,40,48")
    db = tune_dirs / "t.db"
    result = tg.tune(wl, strategy="gensor", trials=4, db=str(db), seed=0, progress=False, policy=FAST)
    assert result.measured >= 1 and result.workload_key == wl.key
    records = SQLiteDatabase(db).records(wl.key, tg.Target("cpu").fingerprint)
    assert records and all(r.kind == "ok" for r in records)
    assert not SQLiteDatabase(db).records(wl.plain.key, tg.Target("cpu").fingerprint)
    x, w = (np.random.default_rng(0).standard_normal(t.shape).astype(np.float32) for t in wl.inputs)
    np.testing.assert_allclose(result.kernel(x, w), x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_the_plain_workloads_records_serve_a_constant_one_that_has_none(tune_dirs):
    wl = _weights()
    db = SQLiteDatabase(tune_dirs / "t.db")
    fp = tg.Target("cpu").fingerprint
    db.commit_record(Record(wl.plain.key, fp, _trace(wl.plain), "ok", latency_s=1e-3, samples=(1e-3,)))
    best = db.best_schedule(wl, "cpu")
    assert best is not None and best.workload is wl
    assert best.trace.instructions == Schedule.replay(wl.plain, _trace(wl.plain)).trace.instructions
    assert best.trace.workload_key == wl.key  # replayed onto the constant workload
    db.commit_record(Record(wl.key, fp, _trace(wl, packs=False), "ok", latency_s=2e-3, samples=(2e-3,)))
    assert db.best_schedule(wl, "cpu").trace.to_json() == _trace(wl, packs=False)  # its own records first


def test_a_shipped_build_carries_and_removes_its_packing_library(tune_dirs):
    wl = _weights()
    build = build_candidate(wl, _trace(wl), "cpu", 60.0)
    shipped = with_library(build)
    assert shipped.library and shipped.prepack[1].library
    local = materialised(shipped, tune_dirs / "node")
    files = sorted((tune_dirs / "node").glob("*.so"))
    assert len(files) == 2 and {local.lib_path, local.prepack[1].lib_path} == {str(f) for f in files}
    with Runner(FAST) as runner:
        assert runner.run(wl, local, seed=4).ok
    discarded(shipped, local)
    assert not list((tune_dirs / "node").glob("*.so"))


def test_with_constants_evicted_a_packed_candidate_is_checked_and_timed(tune_dirs):
    """MeasurePolicy(evict_constants=True): the packed weight (and nothing else) is flushed before
    each timed call; the candidate is checked and timed as without it, the record keeps the policy."""
    wl = _weights()
    build = build_candidate(wl, _trace(wl), "cpu", 60.0)
    assert [a.is_constant for a in build.args] == [False, True, False]
    cold = replace(FAST, evict_constants=True)
    with Runner(cold) as runner:
        result = runner.run(wl, build, seed=3)
    assert result.kind == "ok", result.message
    assert len(result.samples) >= FAST.min_repeats
    record = Record.from_run(wl.key, "fp", _trace(wl), result, policy=runner.policy)
    assert record.policy["evict_constants"] is True
