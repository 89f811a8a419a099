"""Gensor's walk as a mutation (strategy/markov_mutation.py): children of measured Gensor states
mean what their workload means (interpreter against the float64 reference), are new, and auto's
evolutionary phase proposes them and learns from their measurements."""

import random

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.target import Target
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.gensor.markov import MarkovConfig
from tilegraph.tune.gensor.state import EtirState
from tilegraph.tune.hardware import hardware_model
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.auto import AutoStrategy
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy
from tilegraph.tune.strategy.markov_mutation import MarkovMutator

HW = hardware_model(measure=False)
QUICK = MarkovConfig(max_walks=24, time_budget_s=30.0)


def _gensor(wl, k=4):
    gensor = GensorStrategy(top_k=k, config=QUICK, hw=HW)
    return gensor, gensor.propose(TuneContext(wl, Target("cpu"), 0, None), k)


@pytest.mark.parametrize("spec", ["matmul:24,40,32", "C2D-2", "DEP-1", "GRP-4", "TBG-1"])
def test_children_of_measured_states_are_new_and_interpret_to_the_reference(spec):
    wl = workloads.from_spec(spec) if ":" in spec else workloads.get(spec, reduced=True)
    gensor, picks = _gensor(wl)
    mutator = MarkovMutator(gensor.setup, random.Random(3))
    parents = set()
    for n, cand in enumerate(picks):
        state = EtirState.from_dict(cand.meta["state"])
        parents.add(state)
        mutator.measured(state, 1e-3 * (1 + n))
    traces = set()
    children = mutator.propose(4, lambda trace: trace not in traces and not traces.add(trace))
    assert children, "a measured state has neighbours"
    args = random_inputs(wl, seed=5)
    want = reference_outputs(wl, args)
    for child in children:
        assert child.meta["origin"] == "markov" and EtirState.from_dict(child.meta["state"]) not in parents
        got = tg.interpret(tg.Schedule.replay(wl, child.trace_json), *args)
        got = got if isinstance(got, (tuple, list)) else (got,)
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-3)
    assert mutator.propose(4, lambda trace: False) == [], "nothing fresh: nothing proposed"


def test_the_fastest_measured_states_are_the_parents_and_failures_never_are():
    wl = workloads.from_spec("matmul:24,40,32")
    gensor, picks = _gensor(wl)
    mutator = MarkovMutator(gensor.setup, random.Random(0))
    states = [EtirState.from_dict(c.meta["state"]) for c in picks]
    for state, latency in zip(states, [3e-3, float("inf"), 1e-3, 2e-3]):
        mutator.measured(state, latency)
    assert mutator.parents() == [states[2], states[3], states[0]]


def test_auto_proposes_children_of_gensor_states_after_its_gensor_phase():
    wl = workloads.from_spec("matmul:24,40,32")
    auto = AutoStrategy(gensor=GensorStrategy(config=QUICK, hw=HW))
    ctx = TuneContext(wl, Target("cpu"), 0, None, trials_left=40)
    first = auto.propose(ctx, 64)
    assert first and {c.meta["strategy"] for c in first} == {"gensor"}
    auto.notify(ctx, first, [RunResult("ok", samples=(1e-4 * (1 + i),)) for i in range(len(first))])
    batch = auto.propose(ctx, 8)
    markov = [c for c in batch if c.meta.get("origin") == "markov"]
    assert len(batch) == 8 and len(markov) == 2, "a quarter of the batch continues Gensor's walk"
    fastest = markov[0]
    auto.notify(ctx, batch, [RunResult("ok", samples=(1e-5 if c is fastest else 1e-3,)) for c in batch])
    assert auto.markov.parents()[0] == EtirState.from_dict(fastest.meta["state"]), "a faster child becomes a parent"
