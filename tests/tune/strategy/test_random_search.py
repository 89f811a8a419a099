"""RandomSearch: random tilings that replay, never the same trace twice, done when it stops finding new ones."""

import numpy as np

import tilegraph as tg
from tilegraph.schedule.trace import trace_hash
from tilegraph.target import Target
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.random_search import RandomSearch, sample_schedule


def _wl():
    return tg.workloads.from_spec("matmul:12,8,6")


def test_sampled_schedules_replay_and_keep_the_meaning():
    wl = _wl()
    a, b = (np.random.default_rng(s).standard_normal(t.shape).astype("float32") for s, t in enumerate(wl.inputs))
    for seed in range(5):
        sch = sample_schedule(wl, seed)
        assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func
        np.testing.assert_allclose(tg.interpret(sch, a, b), a.astype("float64") @ b, rtol=1e-5, atol=1e-5)


def test_proposals_are_new_and_skip_what_was_measured():
    wl = _wl()
    first = RandomSearch().propose(TuneContext(wl, Target("cpu"), seed=1, db=None), 6)
    hashes = [trace_hash(c.trace_json) for c in first]
    assert len(set(hashes)) == len(hashes) == 6
    again = RandomSearch().propose(TuneContext(wl, Target("cpu"), seed=1, db=None, measured=set(hashes)), 6)
    assert not {trace_hash(c.trace_json) for c in again} & set(hashes)


def test_a_tiny_space_is_exhausted():
    a = tg.te.placeholder((1,), name="A")
    wl = tg.Workload([a], [tg.te.compute((1,), lambda i: a[i] + 1.0, name="B")])
    search = RandomSearch()
    ctx = TuneContext(wl, Target("cpu"), seed=0, db=None)
    proposed = [c for _ in range(10) for c in search.propose(ctx, 4)]
    assert 1 <= len(proposed) <= 4 and search.done()
