import numpy as np
import pytest

from tests.tune.helpers import (
    GOOD_C,
    HANG_C,
    PARTIAL_C,
    SEGFAULT_C,
    WRONG_C,
    SourceBuilder,
    matmul_reference,
    matmul_workload,
)
from tilegraph.schedule import Schedule
from tilegraph.tune.builder import Builder
from tilegraph.tune.measure import MeasureInput, MeasurePolicy
from tilegraph.tune.result import BuildResult
from tilegraph.tune.runner import MeasureLock, MeasureLockTimeout, Runner

pytestmark = pytest.mark.needs_cc


def test_runner_classifies_every_misbehaviour_and_keeps_going(tune_dirs):
    wl = matmul_workload()
    sources = [GOOD_C, SEGFAULT_C, GOOD_C, HANG_C, WRONG_C, PARTIAL_C, GOOD_C]
    with SourceBuilder(max_workers=2) as builder:
        builds = builder.build([MeasureInput(wl, f'{{"n": {n}}}', {"source": s}) for n, s in enumerate(sources)])
    policy = MeasurePolicy(min_time_s=0.01, timeout_s=2.0)
    with Runner(policy, reference=matmul_reference) as runner:
        kinds = [runner.run(wl, b, seed=n) for n, b in enumerate(builds)]
        assert [r.kind for r in kinds] == ["ok", "crash", "ok", "timeout", "wrong_answer", "wrong_answer", "ok"]
        assert "SIGSEGV" in kinds[1].message
        assert "max abs error" in kinds[4].message and kinds[4].max_error > 0.1
        assert "non-finite" in kinds[5].message
        good = kinds[0]
        assert len(good.samples) >= policy.min_repeats and good.median > 0 and good.spread >= 0
        assert runner.restarts == 2


def test_runner_times_a_real_kernel_against_the_library_reference(tune_dirs):
    wl = matmul_workload()
    with Builder(max_workers=1) as builder:
        (build,) = builder.build([MeasureInput(wl, Schedule(wl).trace.to_json())])
    with Runner(MeasurePolicy(min_time_s=0.01, num_threads=1)) as runner:
        result = runner.run(wl, build, seed=3)
    assert result.kind == "ok", result.message


def test_failed_build_passes_through():
    r = Runner(MeasurePolicy()).run(matmul_workload(), BuildResult(False, "build_timeout", "slow"), seed=0)
    assert (r.kind, r.message) == ("build_timeout", "slow")


def test_measure_lock_excludes_a_second_holder(tmp_path):
    path = tmp_path / "m.lock"
    with MeasureLock(path, timeout_s=1):
        with pytest.raises(MeasureLockTimeout, match="another tilegraph process is timing"):
            with MeasureLock(path, timeout_s=0.1):
                pass
    with MeasureLock(path, timeout_s=0.1):
        pass


def test_references_fall_back_to_library(tune_dirs):
    wl = matmul_workload()
    x = [np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)]
    (ref,) = Runner().references(wl, x)
    assert np.allclose(ref, 8.0)


def test_a_lower_timeout_for_one_candidate_kills_a_hang_sooner(tune_dirs):
    """A candidate measured as a tuning budget ends gets the time left, not the policy's 30 s."""
    import time

    wl = matmul_workload()
    with SourceBuilder(max_workers=1) as builder:
        (hang,) = builder.build([MeasureInput(wl, '{"n": 0}', {"source": HANG_C})])
    with Runner(MeasurePolicy(min_time_s=0.01, timeout_s=30.0), reference=matmul_reference) as runner:
        began = time.monotonic()
        r = runner.run(wl, hang, seed=0, timeout_s=0.5)
        assert r.kind == "timeout" and "0.5 s" in r.message
        assert time.monotonic() - began < 15  # the policy's 30 s would not fit


def test_budget_timeout_caps_only_near_the_deadline():
    import time
    from types import SimpleNamespace

    from tilegraph.tune.search_loop import BUDGET_TIMEOUT_FLOOR_S, _budget_timeout

    now = time.monotonic()
    assert _budget_timeout(SimpleNamespace(deadline=None), 3, 30.0) is None
    assert _budget_timeout(SimpleNamespace(deadline=now + 5), 0, 30.0) is None  # the first candidate: always measured
    assert _budget_timeout(SimpleNamespace(deadline=now + 100), 3, 30.0) is None  # the policy's ends first
    assert 4.0 < _budget_timeout(SimpleNamespace(deadline=now + 5), 3, 30.0) <= 5.0
    assert _budget_timeout(SimpleNamespace(deadline=now - 1), 3, 30.0) == BUDGET_TIMEOUT_FLOOR_S
