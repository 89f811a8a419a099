"""A trace recorded on one workload replays on an equal computation with other names: the op
library's matmul and a hand-written one share their key, so they share tuning records."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.errors import ScheduleError
from tilegraph.schedule.trace import Trace, trace_hash
from tilegraph.target import Target
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy

M, K, N = 24, 20, 12


def _library():
    a, b = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    return tg.Workload([a, b], [ops.matmul(a, b)])


def _hand_written():
    x, y = te.placeholder((M, K), name="lhs"), te.placeholder((K, N), name="rhs")
    r = te.reduce_axis(K, "red")
    out = te.compute((M, N), lambda row, col: te.sum(x[row, r] * y[r, col], axis=r), name="product")
    return tg.Workload([x, y], [out])


def _check(sch):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((M, K)).astype("float32")
    y = rng.standard_normal((K, N)).astype("float32")
    np.testing.assert_allclose(tg.interpret(sch, x, y), x.astype("float64") @ y, rtol=1e-5, atol=1e-5)


def _hand_schedule(wl):
    sch = tg.Schedule(wl)
    out = wl.outputs[0]
    i, j, k = sch.loops(out)
    io, ii = sch.split(i, 8)
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(io, j, ko, ii, ki)
    rf = sch.rfactor(out, ki)
    sch.cache_read(rf, wl.inputs[0].name, "local")
    sch.parallel(io)
    return sch


def test_gensor_candidates_of_the_library_matmul_replay_on_the_hand_written_one():
    lib, hand = _library(), _hand_written()
    assert lib.key == hand.key
    ctx = TuneContext(lib, Target("cpu", isa="avx2", num_cores=1), seed=0, db=None)
    candidates = GensorStrategy(top_k=4, measure_hardware=False).propose(ctx, 4)
    assert candidates
    for cand in candidates:
        replayed = tg.Schedule.replay(hand, cand.trace_json)
        _check(replayed)
        trace = replayed.trace
        assert trace.names[:3] == ("lhs", "rhs", "product")
        assert tg.Schedule.replay(hand, trace.to_json()).trace == trace, "the renamed trace replays as itself"


def test_a_hand_schedule_with_rfactor_and_cache_read_replays_renamed_both_ways():
    lib, hand = _library(), _hand_written()
    on_lib = _hand_schedule(lib)
    on_hand = tg.Schedule.replay(hand, on_lib.trace)
    _check(on_hand)
    assert str(on_hand).count("product_rf") >= 1 and "matmul" not in str(on_hand)
    back = tg.Schedule.replay(lib, on_hand.trace)
    assert str(back) == str(on_lib)


def test_the_names_list_is_not_part_of_a_traces_identity():
    trace = _hand_schedule(_library()).trace
    d = trace.to_dict()
    d["names"] = ["other"] * len(d["names"])
    assert trace_hash(Trace.from_json(d).to_json()) == trace_hash(trace.to_json())


def test_names_that_do_not_fit_the_workload_are_refused():
    lib, hand = _library(), _hand_written()
    d = _hand_schedule(lib).trace.to_dict()
    d["names"] = d["names"][:-1]
    with pytest.raises(ScheduleError, match="names"):
        tg.Schedule.replay(hand, Trace.from_json(d))
    d["names"] = 5
    with pytest.raises(ScheduleError, match="names"):
        Trace.from_json(d)
