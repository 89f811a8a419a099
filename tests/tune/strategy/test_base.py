"""strategy/base.py: the SearchStrategy protocol and what a strategy may look at."""

import time

import pytest

import tilegraph as tg
from tilegraph.target import Target
from tilegraph.tune.strategy import STRATEGIES, get_strategy
from tilegraph.tune.strategy.base import SearchStrategy, TuneContext


def test_the_protocol_must_be_implemented():
    with pytest.raises(NotImplementedError):
        SearchStrategy().propose(None, 1)


def test_context_budget_and_fingerprint():
    wl = tg.workloads.from_spec("matmul:4,4,4")
    ctx = TuneContext(wl, Target("cpu", isa="avx2"), seed=0, db=None, deadline=time.monotonic() + 100)
    assert 90 < ctx.time_left_s <= 100 and ctx.target_fingerprint.startswith("cpu-avx2-")
    assert TuneContext(wl, Target("cpu"), seed=0, db=None).time_left_s is None


def test_strategies_by_name():
    assert {"gensor", "roller", "random"} <= set(STRATEGIES)
    assert get_strategy("random").name == "random"
    with pytest.raises(ValueError, match="nope"):
        get_strategy("nope")
