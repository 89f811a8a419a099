"""strategy "tlm" through tg.tune: budgets, correct kernels, determinism, and its clear errors."""

import importlib.util

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import TilegraphError
from tilegraph.target import Target
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.database import open_database
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy import STRATEGIES, get_strategy
from tilegraph.tune.strategy.base import TuneContext

pytest.importorskip("torch")

from tilegraph.tune.strategy.tlm import TLMStrategy  # noqa: E402
from tilegraph.tune.tlm.language import render_trace  # noqa: E402


def _wl():
    return tg.workloads.from_spec("matmul:24,40,32")


@pytest.mark.extended
@pytest.mark.needs_cc
def test_tlm_spends_its_trials_on_sketch_programs_and_returns_a_correct_kernel(tune_dirs, tiny_model_dir):
    wl = _wl()
    db = str(tune_dirs / "tlm.db")
    result = tg.tune(wl, strategy=TLMStrategy(model_dir=tiny_model_dir), trials=10, db=db, progress=False)
    assert result.measured == 10 and result.strategy == "tlm"
    args = random_inputs(wl, seed=5)
    np.testing.assert_allclose(result.kernel(*args), reference_outputs(wl, args)[0], rtol=1e-4, atol=1e-4)
    records = open_database(db).records(wl.key)
    assert len(records) == 10 and {r.meta["strategy"] for r in records} == {"tlm"}
    target = Target.from_string("cpu")
    assert all(render_trace(wl, target, r.trace_json) is not None for r in records)


@pytest.mark.extended
@pytest.mark.needs_cc
def test_the_shipped_model_tunes_through_the_public_api(tune_dirs):
    result = tg.tune("matmul:33,20,17", strategy="tlm", trials=4, db=str(tune_dirs / "s.db"), progress=False)
    assert result.measured == 4 and result.strategy == "tlm"


def _fake_results(candidates):
    # a deterministic "measurement": latency from the trace text
    return [RunResult("ok", samples=(1e-5 * (1 + (sum(map(ord, c.trace_json)) % 97)),)) for c in candidates]


def test_proposals_are_deterministic_under_a_seed(tiny_model_dir):
    runs = []
    for seed in (3, 3, 4):
        ctx = TuneContext(_wl(), Target.from_string("cpu -isa=avx2"), seed, None, trials_left=40)
        strategy = TLMStrategy(model_dir=tiny_model_dir, samples=16)
        picks = []
        for _ in range(3):
            batch = strategy.propose(ctx, 4)
            strategy.notify(ctx, batch, _fake_results(batch))
            picks += [c.trace_json for c in batch]
        runs.append(picks)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    assert len(set(runs[0])) == len(runs[0]) == 12  # never the same program twice


def test_online_adaptation_changes_the_model(tiny_model_dir):
    ctx = TuneContext(_wl(), Target.from_string("cpu -isa=avx2"), 0, None, trials_left=40)
    strategy = TLMStrategy(model_dir=tiny_model_dir, samples=16)
    batch = strategy.propose(ctx, 4)
    before = [p.detach().clone() for p in strategy.net.parameters()]
    strategy.notify(ctx, batch, _fake_results(batch))
    assert any(not (a == b.detach()).all() for a, b in zip(before, strategy.net.parameters()))
    # the process-wide loaded model is not touched by one run's fine-tuning
    fresh = TLMStrategy(model_dir=tiny_model_dir)
    fresh._start(ctx)
    assert all((a == b.detach()).all() for a, b in zip(before, fresh.net.parameters()))


def test_registered_and_clear_errors(tiny_model_dir, monkeypatch, tmp_path):
    assert "tlm" in STRATEGIES and isinstance(get_strategy("tlm"), TLMStrategy)
    gpu = TuneContext(_wl(), Target("opencl"), 0, None, trials_left=8)
    batch = TLMStrategy(model_dir=tiny_model_dir, samples=8).propose(gpu, 4)  # the GPU sketches have words
    assert batch and all(render_trace(gpu.workload, gpu.target, c.trace_json)[1] == "isa:opencl" for c in batch)
    cpu = TuneContext(_wl(), Target.from_string("cpu"), 0, None, trials_left=8)
    with pytest.raises(TilegraphError, match="no TLM model"):
        TLMStrategy(model_dir=tmp_path / "none").propose(cpu, 4)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(TilegraphError, match=r"pip install 'tilegraph\[tlm\]'"):
        get_strategy("tlm")


def test_a_small_space_is_exhausted_without_repeats(tiny_model_dir):
    ctx = TuneContext(tg.workloads.from_spec("relu:4,6"), Target.from_string("cpu -isa=avx2"), 0, None, trials_left=100)
    strategy = TLMStrategy(model_dir=tiny_model_dir, samples=8)
    seen = []
    for _ in range(30):
        batch = strategy.propose(ctx, 4)
        if not batch:
            break
        strategy.notify(ctx, batch, _fake_results(batch))
        seen += [c.trace_json for c in batch]
    assert strategy.done() and seen and len(set(seen)) == len(seen)
