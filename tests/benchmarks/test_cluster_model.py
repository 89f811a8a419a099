"""benchmarks.cluster's scaling model: it reproduces the run it is fitted on, a start-up is paid once
per run (not per build), and same-machine contention applies only where nodes share a machine."""

from __future__ import annotations

import pytest

from benchmarks.cluster import _model_inputs, scaling_model

# a one-builder, one-runner run of 48 candidates: 12 s waiting for 48 builds of 0.2 s (2.4 s beyond them)
ONE = {"measured": 48, "built": 48, "runs": 52, "loop_s": 16.0, "build_wait_s": 12.0, "run_wait_s": 3.2,
       "build_cpu_s": 9.6, "run_cpu_s": 2.6}
BUILD_TIMES = [0.1, 0.2, 0.3, 0.2]


def _row(model: dict, runners: int, machines: int) -> dict:
    return next(r for r in model["rows"] if r["runners"] == runners and r["machines"] == machines)


@pytest.mark.parametrize("warm", [None, 0.01])
def test_model_reproduces_the_run_it_is_fitted_on(warm: float | None) -> None:
    model = scaling_model(ONE, 8, BUILD_TIMES, warm_overhead_s=warm)  # builds drawn: equal in expectation
    assert _row(model, 1, 1)["run_of_n_s"] * ONE["measured"] == pytest.approx(ONE["loop_s"], rel=0.01)


def test_start_up_is_paid_once_per_run_not_per_build() -> None:
    per_build = scaling_model(ONE, 8, BUILD_TIMES, samples=50)
    warm = scaling_model(ONE, 8, BUILD_TIMES, warm_overhead_s=0.01, samples=50)
    assert per_build["start_s"] == pytest.approx(0.0)
    assert warm["start_s"] == pytest.approx(2.4 - 0.01 * 48)
    # the start-up does not shrink with more builders, so more builders gain less than a per-build overhead suggests
    assert _row(warm, 2, 2)["run_of_n_s"] > _row(per_build, 2, 2)["run_of_n_s"]
    # a warm overhead larger than what the run waited cannot make the start-up negative
    assert scaling_model(ONE, 8, BUILD_TIMES, warm_overhead_s=1.0, samples=50)["start_s"] == pytest.approx(0.0)


def test_contention_applies_only_where_nodes_share_a_machine() -> None:
    free = scaling_model(ONE, 8, BUILD_TIMES, warm_overhead_s=0.01, samples=50)
    shared = scaling_model(ONE, 8, BUILD_TIMES, warm_overhead_s=0.01, build_contention=1.5, run_contention=1.25,
                           samples=50)
    assert _row(shared, 2, 1)["per_candidate_s"] > _row(free, 2, 1)["per_candidate_s"]
    for runners, machines in ((1, 1), (2, 2), (8, 8), (64, 64)):
        assert _row(shared, runners, machines)["per_candidate_s"] == pytest.approx(
            _row(free, runners, machines)["per_candidate_s"])


def test_model_inputs_from_the_throughput_phases() -> None:
    measured = {"throughput_builds_per_s": {"ray-1x1": [4.0, 5.0, 4.5], "ray-2": [8.0, 9.0, 8.5]},
                "throughput_runs_per_s": {"ray-1x1": [10.0, 12.0], "ray-2": [11.0, 12.0]},
                "build_times_s": [0.2, 0.2, 0.18, 0.18, 0.21, 0.21]}
    got = _model_inputs(measured, built_at_once=2)
    # rounds: 1/4 - 0.2, 1/5 - 0.18, 1/4.5 - 0.21 -> median 0.02
    assert got["warm_overhead_s"] == pytest.approx(0.02)
    assert got["build_contention"] == pytest.approx(2 * 4.5 / 8.5)
    assert got["run_contention"] == pytest.approx(11.0 / 11.5)
    assert _model_inputs({"throughput_builds_per_s": {}}, built_at_once=0) == {}
