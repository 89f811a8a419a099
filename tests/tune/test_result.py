"""tune/result.py: run results summarise their samples; results of the search."""

from tilegraph.tune.result import RESULT_KINDS, RunResult


def test_statistics_of_samples():
    r = RunResult("ok", samples=(3.0, 1.0, 2.0, 10.0))
    assert r.ok and r.median == 2.5 and r.min == 1.0 and r.max == 10.0 and r.spread == 9.0 / 2.5
    assert RunResult("ok", samples=(2.0,)).median == 2.0


def test_failures_have_no_statistics():
    r = RunResult("crash", "SIGSEGV")
    assert not r.ok and r.median is None and r.spread is None and r.min is None
    assert {"ok", "crash", "timeout", "wrong_answer", "build_error", "build_timeout", "run_error"} <= set(RESULT_KINDS)
