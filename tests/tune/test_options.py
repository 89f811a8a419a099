"""tune/options.py: TuneOptions validate once; keywords override; num_threads and the policy agree."""

import pytest

from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.options import DEFAULT_TRIALS, TuneOptions


@pytest.mark.parametrize("kwargs, message", [
    ({"time_budget": 0}, "time_budget"), ({"trials": -1}, "trials"), ({"trials": True}, "trials"),
    ({"batch_size": 0}, "batch_size"), ({"build_timeout_s": 0}, "build_timeout_s"),
])
def test_bad_values_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TuneOptions(**kwargs)


def test_budgets():
    assert TuneOptions().trial_limit == DEFAULT_TRIALS
    assert TuneOptions(time_budget=5).trial_limit is None and TuneOptions(trials=3, time_budget=5).trial_limit == 3


def test_num_threads_fills_the_policy_and_conflicts_are_refused():
    assert TuneOptions(num_threads=2).policy.num_threads == 2
    assert TuneOptions(policy=MeasurePolicy(num_threads=3)).policy.num_threads == 3
    with pytest.raises(ValueError, match="conflicts"):
        TuneOptions(num_threads=2, policy=MeasurePolicy(num_threads=1))
    assert TuneOptions(num_threads=2).updated(num_threads=4).policy.num_threads == 4


def test_unknown_fields_name_the_known_ones():
    with pytest.raises(TypeError, match="unknown option.*'budget'.*time_budget"):
        TuneOptions().updated(budget=3)
