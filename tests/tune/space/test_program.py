"""Programs and mutators: mutants stay legal (they replay and keep the meaning), tile mutations keep
the product, sketch traces are recognised, and Gensor's picks can be mutated through their traces."""

import math
import random

import numpy as np

import tilegraph as tg
from tilegraph import workloads
from tilegraph.target import Target
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.hardware import hardware_model
from tilegraph.tune.space.program import move_factor, mutate, recognise, sample
from tilegraph.tune.space.sketch import sketches_for
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy


def _check(wl, sch):
    args = random_inputs(wl, seed=5)
    got = tg.interpret(sch, *args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for g, r in zip(got, reference_outputs(wl, args)):
        np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-3)


def test_move_factor_keeps_the_product_and_the_innermost_cap():
    rng = random.Random(0)
    for _ in range(200):
        moved = move_factor([2, 3, 4, 8], rng, max_innermost=16)
        if moved is not None:
            assert math.prod(moved) == 192 and moved[-1] <= 16
    assert move_factor([1, 1, 1], rng) is None


def test_mutants_of_sketch_programs_replay_and_keep_the_meaning():
    for wid in ("GMM-1", "C2D-2", "SFM-1", "DEP-1"):
        wl = workloads.get(wid, reduced=True)
        rng = random.Random(1)
        parent = sample(wl, sketches_for(wl)[0], rng)
        changed = 0
        for _ in range(6):
            child = mutate(wl, parent, rng)
            if child is None:
                continue
            changed += child.trace_json != parent.trace_json
            replayed = tg.Schedule.replay(wl, child.trace_json)
            assert replayed.func == child.func
            _check(wl, replayed)
            parent = child
        assert changed


def test_recognise_recovers_a_sketch_programs_decisions():
    wl = workloads.from_spec("matmul:32,48,64")
    p = sample(wl, "multi_level_tiling", random.Random(3))
    again = recognise(wl, p.trace_json)
    assert again is not None and again.sketch == p.sketch and again.decisions == p.decisions
    assert recognise(workloads.from_spec("matmul:8,8,8"), p.trace_json) is None  # another workload


def test_gensor_picks_are_mutated_through_their_traces():
    wl = workloads.get("GMM-1", reduced=True)
    cand = GensorStrategy(hw=hardware_model(measure=False)).propose(TuneContext(wl, Target("cpu"), 0, None), 1)[0]
    prog = recognise(wl, cand.trace_json)
    assert prog is not None and prog.sketch is None
    rng = random.Random(0)
    children = [c for c in (mutate(wl, prog, rng) for _ in range(5)) if c is not None]
    assert children and all(c.trace_json != prog.trace_json for c in children)
    for c in children[:2]:
        _check(wl, tg.Schedule.replay(wl, c.trace_json))
