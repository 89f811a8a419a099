"""graph/tuning/scheduler.py: first round, Ansor's gradient, budgets, early stopping and resume,
against a fake session (scripted latencies, a fake clock): no compiler needed."""

from types import SimpleNamespace

import numpy as np
import pytest

from tilegraph.graph import GraphBuilder, TensorType
from tilegraph.graph.fusion.partition import partition
from tilegraph.graph.tuning import scheduler as sched
from tilegraph.graph.tuning.scheduler import TaskScheduler
from tilegraph.graph.tuning.tasks import extract_tasks
from tilegraph.target import as_target
from tilegraph.tune.database import Record
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.session import SliceResult
from tilegraph.tune.strategy.base import SearchStrategy

RNG = np.random.default_rng(0)


def _const(b, *shape):
    return b.constant(RNG.standard_normal(shape).astype(np.float32))


def model_tasks():
    """Three tasks: a large matmul used 3 times, a small matmul once, a softmax once."""
    b = GraphBuilder()
    x = b.input("x", TensorType((16, 64), "float32"))
    for _ in range(3):
        x = b.add("relu", [b.add("matmul", [x, _const(b, 64, 64)])])
    y = b.add("softmax", [b.add("matmul", [x, _const(b, 64, 8)])])
    graph = b.build([y])
    return extract_tasks(graph, partition(graph))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Done(SearchStrategy):
    name = "fake"

    def __init__(self, exhausted=False):
        self.exhausted = exhausted

    def done(self):
        return self.exhausted


SETTLE_COST = 0.5


class FakeSession:
    """Each task's k-th new measurement has latency curve[k]; every slice costs `cost` seconds."""

    def __init__(self, curves, clock, cost=1.0, space=None, costs=None):
        self.target = as_target("cpu")
        self.curves = curves
        self.clock = clock
        self.cost = cost
        self.costs = costs or {}  # per workload key: its slices' cost, else `cost`
        self.space = space or {}
        self.recs = {}
        self.calls = []

        self.settled = []  # the workloads whose best records were re-timed, in order
        self.runner = SimpleNamespace(policy=MeasurePolicy())

    def records(self, wl):
        return list(self.recs.get(wl.key, []))

    def best(self, wl):
        ok = [r for r in self.recs.get(wl.key, []) if r.ok]
        return min(ok, key=lambda r: r.latency_s) if ok else None

    def retime_best(self, wl, deadline=None):
        """Settling: costs SETTLE_COST on the clock, leaves the records as they are."""
        self.settled.append(wl.key)
        self.clock.now += SETTLE_COST
        return sorted(self.recs.get(wl.key, []), key=lambda r: r.latency_s)[:3]

    def tune_slice(self, wl, strategy, trials, deadline=None, seed=None):
        recs = self.recs.setdefault(wl.key, [])
        curve = self.curves[wl.key]
        n = min(trials, self.space.get(wl.key, 10**9) - len(recs))
        for _ in range(max(0, n)):
            meta = {"strategy": "default"} if not recs else {"strategy": "fake"}
            recs.append(Record(wl.key, "fp", f"trace{len(recs)}", "ok", latency_s=curve[min(len(recs), len(curve) - 1)],
                               meta=meta))
        self.calls.append((wl.key, max(0, n)))
        cost = self.costs.get(wl.key, self.cost)
        self.clock.now += cost
        best = min(r.latency_s for r in recs) if recs else None
        return SliceResult(max(0, n), best, cost)


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(sched.time, "monotonic", c)
    return c


def _scheduler(tasks, session, **kw):
    return TaskScheduler(tasks, session, slice_strategy=lambda task, gen: Done(), **kw)


def test_tasks_have_weights_flops_and_variants():
    tasks = model_tasks()
    assert [t.op for t in tasks] == ["matmul", "matmul", "softmax"]
    big, small, soft = tasks
    assert (big.weight, small.weight, soft.weight) == (3, 1, 1)
    assert big.flops == 2 * 16 * 64 * 64 and small.flops == 2 * 16 * 64 * 8
    assert len(big.variants) == 1 and big.variants[0] != big.key  # fused with its relu: a variant
    assert "16x64 . 64x64" in big.name


def test_first_round_goes_largest_share_first_and_seeds_the_default(clock):
    tasks = model_tasks()
    curves = {t.key: [1.0, 0.5] for t in tasks}
    session = FakeSession(curves, clock)
    s = _scheduler(tasks, session, trials=3 * (sched.FIRST_TRIALS + 1)).run()
    assert [k for k, _ in session.calls] == [tasks[0].key, tasks[1].key, tasks[2].key]
    assert all(n == sched.FIRST_TRIALS + 1 for _, n in session.calls)
    assert all(st.before_s == 1.0 and st.best_s == 0.5 for st in s.states)
    assert s.stop_reason == "trial budget spent"


def test_gradient_gives_slices_to_the_task_that_improves_the_model_most(clock):
    big, small, soft = model_tasks()
    improving = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04]
    curves = {big.key: improving, small.key: [0.01] * 40, soft.key: [0.01] * 40}
    session = FakeSession(curves, clock)
    s = _scheduler([big, small, soft], session, time_budget=12).run()
    later = [k for k, _ in session.calls[3:]]
    assert later and later.count(big.key) > len(later) / 2
    assert s.states[0].best_s < 0.5


def test_time_budget_is_honoured_within_five_percent(clock):
    tasks = model_tasks()
    session = FakeSession({t.key: [1.0 / (1 + k) for k in range(200)] for t in tasks}, clock, cost=1.0)
    s = _scheduler(tasks, session, time_budget=20.5).run()
    assert clock.now <= 20.5 * 1.05
    assert clock.now >= 20.5 - 1.0  # and spent, not left idle
    assert s.stop_reason.startswith("time budget spent")


def test_the_last_tenth_of_a_time_budget_settles_the_heaviest_tasks_first(clock):
    tasks = model_tasks()
    session = FakeSession({t.key: [1.0 / (1 + k) for k in range(200)] for t in tasks}, clock, cost=1.0)
    s = _scheduler(tasks, session, time_budget=20.5).run()
    searched = sum(cost for cost in s.states[0].slice_seconds) + sum(
        cost for st in s.states[1:] for cost in st.slice_seconds)
    assert searched <= 20.5 * (1 - sched.SETTLE_SHARE) + 1.0  # the search stopped at its share
    assert session.settled  # the rest re-timed the best records
    weights = {st.task.key: st.task.weight * st.best_s for st in s.states}
    assert session.settled == sorted(session.settled, key=lambda k: -weights[k])
    assert all(st.settled == (st.task.key in session.settled) for st in s.states)


def test_a_trial_budget_alone_settles_nothing(clock):
    tasks = model_tasks()
    session = FakeSession({t.key: [1.0, 0.5, 0.4] for t in tasks}, clock)
    _scheduler(tasks, session, trials=12).run()
    assert session.settled == []


def test_one_costly_first_slice_does_not_price_the_smaller_tasks_out_of_the_first_round(clock):
    # GPT-2 on a GPU: the LM head's first slice took 22 s of 40, and a mean of the first slices
    # then priced every other task out; a smaller task's first slice is expected to cost less.
    big, small, soft = model_tasks()
    session = FakeSession({t.key: [1.0, 0.5] for t in (big, small, soft)}, clock,
                          costs={big.key: 22.0, small.key: 4.0, soft.key: 4.0})
    s = _scheduler([big, small, soft], session, time_budget=40).run()
    assert [k for k, _ in session.calls[:3]] == [big.key, small.key, soft.key]
    assert all(st.before_s == 1.0 for st in s.states)
    assert clock.now <= 40 + 4.0


def test_tasks_that_stop_improving_die_and_the_run_stops(clock):
    tasks = model_tasks()
    session = FakeSession({t.key: [1.0, 0.5] for t in tasks}, clock)
    s = _scheduler(tasks, session, time_budget=1000).run()
    assert all(st.dead and st.dead.startswith("converged") for st in s.states)
    assert s.stop_reason == "every task converged or exhausted"
    assert clock.now < 100


def test_exhausted_spaces_die(clock):
    tasks = model_tasks()
    session = FakeSession({t.key: [1.0 / (1 + k) for k in range(100)] for t in tasks}, clock,
                          space={t.key: 7 for t in tasks})
    s = TaskScheduler(tasks, session, time_budget=1000, slice_strategy=lambda task, gen: Done(exhausted=True)).run()
    assert all(st.dead == "search space exhausted" for st in s.states)
    assert all(len(session.recs[t.key]) == 7 for t in tasks)


def test_trial_budget_counts_earlier_runs_and_resume_skips_the_first_round(clock):
    tasks = model_tasks()
    curves = {t.key: [1.0 / (1 + k) for k in range(100)] for t in tasks}
    session = FakeSession(curves, clock)
    _scheduler(tasks, session, trials=8).run()  # "killed" after 8 measurements
    first = sum(len(r) for r in session.recs.values())
    assert first == 8
    session.calls.clear()
    resumed = _scheduler(tasks, session, trials=30).run()
    assert sum(len(r) for r in session.recs.values()) == 30
    started = [st for st in resumed.states if st.slices]
    assert all(st.before_s == 1.0 for st in started)
    # the task tuned before the "kill" got no second default/first slice
    assert session.calls[0][0] != tasks[0].key
    session.calls.clear()
    again = _scheduler(tasks, session, trials=30).run()
    assert session.calls == [] and again.stop_reason == "trial budget spent"


def test_a_budget_is_required():
    with pytest.raises(ValueError, match="budget"):
        TaskScheduler(model_tasks(), FakeSession({}, Clock()))


def test_buckets_are_tasks_and_each_first_slice_measures_its_nearest_measured_neighbour(clock):
    import json

    from tilegraph.graph.buckets import bucket_plan
    from tilegraph.tune.strategy.seeded import SeededStrategy

    b = GraphBuilder()
    x = b.input("x", TensorType((1, 32, 64), "float32"))
    y = b.add("softmax", [b.add("matmul", [x, _const(b, 64, 64)])])
    graph = b.build([y]).replace(dims={"seq": (1, 32)}, input_dims={"x": (None, "seq", None)})
    plan = bucket_plan(graph, {"seq": [8, 16]})
    tasks = extract_tasks(graph, partition(graph), plan)
    assert [t.bucket for t in tasks if t.op == "matmul"] == [(1, 8), (9, 16), (17, 32)]
    assert all(t.weight == pytest.approx(1 / 3) for t in tasks)
    assert len({t.key for t in tasks}) == len(tasks) == 6

    class Traced(FakeSession):  # records hold real (empty) traces; the strategies given are kept
        def tune_slice(self, wl, strategy, trials, deadline=None, seed=None):
            self.strategies = getattr(self, "strategies", {})
            self.strategies.setdefault(wl.key, (strategy, trials))  # the first slice
            result = super().tune_slice(wl, strategy, trials, deadline, seed)
            self.recs[wl.key] = [Record(r.workload_key, r.target_fingerprint,
                                        json.dumps({"version": 1, "workload_key": wl.key, "instructions": []}),
                                        r.kind, latency_s=r.latency_s, meta=r.meta) for r in self.recs[wl.key]]
            return result

    session = Traced({t.key: [1.0, 0.5] for t in tasks}, clock)
    _scheduler(tasks, session, trials=100).run()
    by_bucket = {t.bucket: t for t in tasks if t.op == "matmul"}
    first, _ = session.strategies[by_bucket[(17, 32)].key]  # the largest bucket is measured first: no neighbour yet
    middle, trials = session.strategies[by_bucket[(9, 16)].key]
    assert isinstance(middle, SeededStrategy) and trials == sched.FIRST_TRIALS + 2
    seeds = [c for c in middle._seeds if c.meta.get("strategy") == "neighbour bucket"]
    assert len(seeds) == 1 and json.loads(seeds[0].trace_json)["workload_key"] == by_bucket[(9, 16)].key
    assert not [c for c in first._seeds if c.meta.get("strategy") == "neighbour bucket"]


def _bucketed_graph():
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 32, 64), "float32"))
    y = b.add("softmax", [b.add("matmul", [x, _const(b, 64, 64)])])
    return b.build([y]).replace(dims={"seq": (1, 32)}, input_dims={"x": (None, "seq", None)})


def test_expected_lengths_weigh_each_buckets_tasks_by_the_lengths_within_it():
    from tilegraph.graph.buckets import UNEXPECTED_SHARE, bucket_plan

    graph = _bucketed_graph()
    plan = bucket_plan(graph, {"seq": [8, 16]}, {"seq": [12, 12, 12, 30]})
    even = UNEXPECTED_SHARE / 3
    assert plan.shares == pytest.approx((even, 0.75 * (1 - UNEXPECTED_SHARE) + even, 0.25 * (1 - UNEXPECTED_SHARE) + even))
    weights = {t.bucket: t.weight for t in extract_tasks(graph, partition(graph), plan) if t.op == "matmul"}
    assert weights == pytest.approx({(1, 8): plan.shares[0], (9, 16): plan.shares[1], (17, 32): plan.shares[2]})
    assert sum(plan.shares) == pytest.approx(1.0)
    assert bucket_plan(graph, None, {"seq": 5}).shares[0] > 0.9  # one value: its bucket (1..16) takes the budget


def test_expected_lengths_that_do_not_fit_the_model_are_one_line_errors():
    from tilegraph.errors import GraphError
    from tilegraph.graph.buckets import bucket_plan

    graph = _bucketed_graph()
    for expected, message in (({"seq": [0, 5]}, r"\[0\] of dim seq outside its range \[1, 32\]"),
                              ({"len": [5]}, "names dim 'len'; the model's dims are seq"),
                              ({"seq": []}, "non-empty list of integers"), ({"seq": [1.5]}, "non-empty list of integers"),
                              ([5], r"takes \{dim: values\}")):
        with pytest.raises(GraphError, match=message):
            bucket_plan(graph, None, expected)


def test_the_expected_bucket_gets_the_most_slices(clock):
    from tilegraph.graph.buckets import bucket_plan

    graph = _bucketed_graph()
    tasks = extract_tasks(graph, partition(graph), bucket_plan(graph, {"seq": [8, 16]}, {"seq": [12]}))
    session = FakeSession({t.key: [1.0 / (i + 1) for i in range(200)] for t in tasks}, clock)  # never stops improving
    _scheduler(tasks, session, trials=400).run()
    spent = {t.bucket: sum(n for key, n in session.calls if key == t.key) for t in tasks if t.op == "matmul"}
    assert spent[(9, 16)] > spent[(1, 8)] and spent[(9, 16)] > spent[(17, 32)]


def test_expected_values_of_a_model_without_dims_say_how_to_make_one():
    from tilegraph.errors import GraphError
    from tilegraph.graph.buckets import bucket_plan

    b = GraphBuilder()
    x = b.input("x", TensorType((1, 32, 64), "float32"))
    graph = b.build([b.add("relu", [x])])
    with pytest.raises(GraphError, match=r"no run-time dims; keep the extent a dim with dims=\{'seq'"):
        bucket_plan(graph, None, {"seq": [4]})
