import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.loop.interpret import interpret
from tilegraph.testing import reference
from tilegraph.tune.gensor.markov import MarkovConfig
from tilegraph.tune.hardware import hardware_model
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy import STRATEGIES
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy
from tilegraph.tune.strategy.roller import RollerStrategy

HW = hardware_model(measure=False)
FAST = MarkovConfig(max_walks=80, time_budget_s=30.0)


def _matmul():
    a, b = te.placeholder((64, 40), name="A"), te.placeholder((40, 48), name="B")
    return tg.Workload([a, b], [ops.matmul(a, b)]), lambda x, y: x.astype(np.float64) @ y


def _conv():
    x, w = te.placeholder((1, 6, 6, 4), name="x"), te.placeholder((3, 3, 4, 16), name="w")
    return tg.Workload([x, w], [ops.conv2d_nhwc(x, w, padding=1)]), lambda x, w: reference.conv2d_nhwc(x, w, padding=1)


def _depthwise():
    x, w = te.placeholder((1, 6, 6, 16), name="x"), te.placeholder((3, 3, 16, 1), name="w")
    wl = tg.Workload([x, w], [ops.depthwise_conv2d_nhwc(x, w, padding=1)])
    return wl, lambda x, w: reference.depthwise_conv2d_nhwc(x, w, padding=1)


def _softmax():
    x = te.placeholder((6, 40), name="x")
    return tg.Workload([x], [ops.softmax(x)]), lambda x: reference.softmax(x)


def _context(wl, seed=0):
    return TuneContext(workload=wl, target="cpu", seed=seed, db=None)


def _inputs(wl, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]


@pytest.mark.parametrize("make", [_matmul, _conv, _depthwise, _softmax], ids=["matmul", "conv", "depthwise", "softmax"])
@pytest.mark.parametrize("strategy_cls", [GensorStrategy, RollerStrategy], ids=["gensor", "roller"])
def test_every_proposed_state_replays_to_the_numpy_result(make, strategy_cls):
    wl, ref = make()
    strategy = strategy_cls(top_k=3, config=FAST, hw=HW)
    cands = strategy.propose(_context(wl), 8)
    assert 1 <= len(cands) <= 3 and strategy.done()
    assert len({c.trace_json for c in cands}) == len(cands)
    preds = [c.predicted for c in cands]
    assert preds == sorted(preds)
    args = _inputs(wl)
    expected = ref(*args)
    for cand in cands:
        assert "state" in cand.meta
        sch = tg.Schedule.replay(wl, cand.trace_json)
        got = interpret(sch, *args)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_gensor_is_deterministic_under_a_seed():
    wl, _ = _matmul()
    runs = [GensorStrategy(top_k=4, config=FAST, hw=HW).propose(_context(wl, seed=5), 8) for _ in range(2)]
    assert [c.trace_json for c in runs[0]] == [c.trace_json for c in runs[1]]


def test_gensor_never_predicts_worse_than_its_roller_seeds():
    wl, _ = _matmul()
    g = GensorStrategy(top_k=1, config=FAST, hw=HW).propose(_context(wl), 1)[0]
    r = RollerStrategy(top_k=1, hw=HW).propose(_context(wl), 1)[0]
    assert g.predicted <= r.predicted


def test_notify_computes_spearman():
    wl, _ = _matmul()
    strategy = GensorStrategy(top_k=4, config=FAST, hw=HW)
    cands = strategy.propose(_context(wl), 4)
    results = [RunResult("ok", samples=(c.predicted * 2,)) for c in cands]
    strategy.notify(_context(wl), cands, results)
    assert strategy.spearman == pytest.approx(1.0)
    assert len(strategy.history) == len(cands)


def test_registered_and_checked_arguments():
    assert STRATEGIES["gensor"] is GensorStrategy and STRATEGIES["roller"] is RollerStrategy
    with pytest.raises(ValueError, match="top_k"):
        GensorStrategy(top_k=0)


@pytest.mark.needs_cc
@pytest.mark.slow
def test_best_gensor_candidate_builds_and_matches():
    wl, ref = _matmul()
    cand = GensorStrategy(top_k=1, config=FAST, hw=HW).propose(_context(wl), 1)[0]
    kernel = tg.build(tg.Schedule.replay(wl, cand.trace_json), target="cpu")
    args = _inputs(wl)
    np.testing.assert_allclose(kernel(*args), ref(*args), rtol=1e-4, atol=1e-4)
