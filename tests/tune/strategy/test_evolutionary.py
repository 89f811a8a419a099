"""evolutionary and auto through tg.tune: trial budgets, correct kernels, Gensor's picks in the
population, and auto never worse than its Gensor phase."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.target import Target
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.cost_model.gpu_features import GPU_PER_STORE_FEATURES
from tilegraph.tune.database import open_database
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy import STRATEGIES, get_strategy
from tilegraph.tune.strategy.auto import AutoStrategy
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.evolutionary import EvolutionarySearch

pytestmark = pytest.mark.needs_cc


def _wl():
    return tg.workloads.from_spec("matmul:24,40,32")


def _assert_correct(wl, kernel):
    args = random_inputs(wl, seed=11)
    np.testing.assert_allclose(kernel(*args), reference_outputs(wl, args)[0], rtol=1e-4, atol=1e-4)


def test_auto_is_the_default_and_both_are_registered():
    assert TuneOptions().strategy == "auto"
    assert {"auto", "evolutionary"} <= set(STRATEGIES)
    assert isinstance(get_strategy("auto"), AutoStrategy)


@pytest.mark.extended
def test_evolutionary_spends_exactly_its_trials_and_returns_a_correct_kernel(tune_dirs):
    wl = _wl()
    db = str(tune_dirs / "evo.db")
    result = tg.tune(wl, strategy="evolutionary", trials=12, db=db, progress=False)
    assert result.measured == 12 and result.strategy == "evolutionary"
    _assert_correct(wl, result.kernel)
    records = open_database(db).records(wl.key)
    assert len(records) == 12 and {r.meta.get("origin") for r in records} <= {"evolved", "random"}


@pytest.mark.extended
def test_auto_with_a_tiny_budget_is_never_slower_than_its_gensor_phase(tune_dirs):
    wl = _wl()
    db = str(tune_dirs / "auto.db")
    result = tg.tune(wl, strategy="auto", trials=14, db=db, progress=False)
    assert result.measured == 14
    records = open_database(db).records(wl.key)
    gensor = [r.latency_s for r in records if r.ok and r.meta.get("strategy") == "gensor"]
    evolved = [r for r in records if r.meta.get("strategy") == "evolutionary"]
    assert gensor and evolved  # Gensor's picks first, then the evolutionary phase
    assert result.latency_s <= min(gensor)
    _assert_correct(wl, result.kernel)


def test_auto_without_a_budget_is_gensor_alone():
    wl = _wl()
    auto = AutoStrategy()
    ctx = TuneContext(wl, Target("cpu"), 0, None)
    first = auto.propose(ctx, 64)
    assert first and all(c.meta.get("strategy") == "gensor" for c in first)
    assert auto.propose(ctx, 8) == [] and auto.done()


def test_evolution_seeds_its_population_with_the_given_traces():
    wl = _wl()
    auto = AutoStrategy()
    ctx = TuneContext(wl, Target("cpu"), 0, None, trials_left=40)
    picks = auto.propose(ctx, 64)
    search = EvolutionarySearch(seeds=[c.trace_json for c in picks])
    batch = search.propose(ctx, 8)
    assert len(batch) == 8
    seeded = {p.trace_json for p in search._seed_programs}
    assert len(seeded) == len(picks)  # every Gensor pick is in the population (a foreign trace, mutated as one)
    assert all(p.sketch is None for p in search._seed_programs)


@pytest.mark.extended
def test_auto_spends_its_time_budget_on_a_fake_clock(tune_dirs, monkeypatch):
    """The budget logic against a clock that moves only when a candidate is measured (each
    "takes" 0.37 s): the search measures until the budget is spent and stops within one candidate
    of it. (How far a real run overshoots on a loaded machine is measured by the benchmarks, not
    asserted here: no test depends on this machine's timings.)"""
    import importlib

    from tilegraph.tune.builder import Builder
    from tilegraph.tune.result import BuildResult, RunResult
    from tilegraph.tune.runner import Runner

    cost, clock = 0.37, [1000.0]
    tune_module = importlib.import_module("tilegraph.tune.tune")
    monkeypatch.setattr(tune_module.time, "monotonic", lambda: clock[0])
    rng = np.random.default_rng(0)

    class MeasuredOnTheFakeClock(Runner):
        def run(self, wl, build, seed=0, timeout_s=None, best_s=None):
            clock[0] += cost
            return RunResult("ok", samples=(float(rng.uniform(1e-4, 2e-4)),) * 3, max_error=0.0)

    class NotBuilt(Builder):  # candidates are "measured" on the fake clock only; the returned best is built
        def build(self, inputs):
            return [BuildResult(True) for _ in inputs]

    wl = _wl()
    budget = 10.0
    result = tg.tune(wl, strategy="auto", time_budget=budget, db=str(tune_dirs / "t.db"), progress=False,
                     runner=MeasuredOnTheFakeClock(), builder=NotBuilt())
    assert budget - cost <= result.tuning_time_s <= budget + cost
    assert result.measured > 8  # past Gensor's picks: the evolutionary phase measured too (a new best is measured twice)
    _assert_correct(wl, result.kernel)


def test_gpu_targets_get_gensor_then_gpu_sketches_from_auto_and_gpu_sketches_from_evolutionary():
    from tilegraph.tune.space.sketch import space_for

    wl = _wl()
    ctx = TuneContext(wl, Target("opencl"), 0, None, trials_left=40)
    auto = AutoStrategy()
    first = auto.propose(ctx, 64)
    assert first and {c.meta.get("strategy") for c in first} == {"gensor"}
    auto.notify(ctx, first, [RunResult("ok", samples=(1e-4 * (1 + i),)) for i in range(len(first))])
    then = auto.propose(ctx, 8)  # with a budget left, the evolutionary phase samples the GPU sketches
    assert then and auto.phase == "evolutionary" and not auto.done()
    assert {c.meta.get("sketch") for c in then} <= {"gpu_multi_level_tiling", "gpu_flat", None}
    no_budget = TuneContext(wl, Target("opencl"), 0, None, budget_given=False)
    plain = AutoStrategy()
    assert plain.propose(no_budget, 64)
    assert plain.propose(no_budget, 8) == [] and plain.done()
    assert space_for(wl, Target("opencl")) == ["gpu_multi_level_tiling", "gpu_flat"]
    assert space_for(wl, Target("cpu")) == ["multi_level_tiling"]
    proposed = EvolutionarySearch().propose(ctx, 4)
    assert proposed and {c.meta["sketch"] for c in proposed} <= {"gpu_multi_level_tiling", "gpu_flat"}


@pytest.mark.extended
@pytest.mark.needs_opencl
@pytest.mark.filterwarnings("ignore::Warning")  # PoCL's compiler chatter
@pytest.mark.parametrize("spec", ["matmul:24,40,32", "softmax:5,33"])
def test_evolutionary_tunes_an_opencl_target_with_checked_kernels(tune_dirs, spec):
    """The GPU sketches (tune/space/gpu_sketch.py) through tg.tune on PoCL: every candidate built
    for the device, checked against the reference and timed; the result is correct."""
    from tilegraph.runtime.opencl import available
    from tilegraph.tune.measure import MeasurePolicy

    if not available():
        pytest.skip("no OpenCL device")
    wl = tg.workloads.from_spec(spec)
    db = str(tune_dirs / "gpu.db")
    result = tg.tune(wl, target="opencl", strategy="evolutionary", trials=8, db=db, progress=False,
                     policy=MeasurePolicy(min_time_s=0.005, min_repeats=3, warmup=1))
    args = random_inputs(wl, seed=11)
    got = np.asarray(result.kernel(*args)).reshape(wl.outputs[0].shape)
    np.testing.assert_allclose(got, reference_outputs(wl, args)[0], rtol=1e-4, atol=1e-4)
    records = open_database(db).records(wl.key)
    assert len(records) == 8
    assert {r.meta.get("sketch") for r in records} <= {"gpu_rows", "gpu_multi_level_tiling", "gpu_flat"}
    # ranked with the GPU feature set, never the CPU one
    assert {r.meta.get("features") for r in records} <= {GPU_PER_STORE_FEATURES.version, None}


def test_tg_tune_without_a_budget_runs_auto_as_gensor_alone(tune_dirs):
    wl = _wl()
    db = str(tune_dirs / "nobudget.db")
    result = tg.tune(wl, db=db, progress=False)  # no budget: the default trial cap must not start the evolution
    records = open_database(db).records(wl.key)
    assert result.strategy == "auto" and 1 <= result.measured <= 8
    assert {r.meta.get("strategy") for r in records} == {"gensor"}


@pytest.mark.extended
def test_the_search_ranks_with_any_cost_model_and_records_its_feature_version(tune_dirs):
    """A hand-written CostModel (cost_model/base.py) plugs into the evolutionary search: once it is
    trained, every candidate it ranked carries its score and its feature set's version."""
    from tilegraph.tune.cost_model import CostModel, FeatureSet
    from tilegraph.tune.cost_model.features import NUM_FEATURES, program_features

    class ByStoreCount:
        name = "store-count"
        feature_set = FeatureSet("per-store", "per-store-test-1", NUM_FEATURES, program_features)

        def __init__(self):
            self.seen = 0

        @property
        def trained(self):
            return self.seen >= 4

        def fresh(self):
            model = ByStoreCount()
            model.seen = self.seen
            return model

        def add(self, programs, costs, group=""):
            self.seen += len(programs)

        def update(self, programs, costs, group=""):
            self.seen = len(programs)

        def predict(self, programs):
            return np.array([-float(len(p)) for p in programs]) if self.trained else None

    model = ByStoreCount()
    assert isinstance(model, CostModel)
    wl = _wl()
    db = str(tune_dirs / "evo.db")
    result = tg.tune(wl, strategy=EvolutionarySearch(model=model), trials=12, db=db, progress=False)
    _assert_correct(wl, result.kernel)
    ranked = [r for r in open_database(db).records(wl.key) if "score" in r.meta]
    assert ranked and all(r.meta["features"] == "per-store-test-1" for r in ranked)
