"""A cost model that transfers: a prior trained on other workloads ranks a new one before any
measurement, fine-tuning goes on from it, and a prior is read only for the features it was
trained on. The shipped prior ranks a family of real programs as their structure says."""

import json
import math

import numpy as np
import pytest

from tilegraph.tune.cost_model import default_cost_model
from tilegraph.tune.cost_model.base import FeatureSet
from tilegraph.tune.cost_model.features import NUM_FEATURES, PER_STORE_FEATURES
from tilegraph.tune.cost_model.gbt import GBTCostModel
from tilegraph.tune.cost_model.transfer import (
    PriorError,
    WorkloadPrograms,
    evaluate,
    load_prior,
    save_prior,
    spearman,
    train_prior,
)


def _family(key: str, n: int, seed: int, scale: float) -> WorkloadPrograms:
    """Programs of one synthetic workload: random features, faster with more of features 3 and 10
    (summed over the stores); each workload's costs on its own scale, as real workloads' are."""
    rng = np.random.default_rng(seed)
    feats = [rng.random((int(rng.integers(1, 4)), NUM_FEATURES)).astype(np.float32) for _ in range(n)]
    costs = [scale / (0.1 + f[:, 3].sum() + 0.5 * f[:, 10].sum()) for f in feats]
    return WorkloadPrograms(key, key, "synthetic", feats, costs)


@pytest.fixture(scope="module")
def families() -> list[WorkloadPrograms]:
    return [_family(f"w{i}", 60, i, 10.0 ** (i % 5 - 4)) for i in range(8)]


def test_a_prior_trained_on_other_workloads_ranks_a_held_out_one_before_any_measurement(families):
    prior = train_prior(families[:6])
    held = families[6]
    model = GBTCostModel(prior=prior)
    assert model.trained and len(model) == 0  # ranks from the first program: no random warm-up
    assert spearman(model.predict(held.feats), held.costs) > 0.8
    blind = GBTCostModel()
    assert not blind.trained and blind.predict(held.feats) is None


def test_fine_tuning_goes_on_from_the_prior_and_fresh_models_keep_it(families):
    prior = train_prior(families[:6])
    held = families[7]
    model = GBTCostModel(prior=prior)
    model.update(held.feats[:8], held.costs[:8], held.key)  # PRIOR_WARMUP programs: fine-tuned
    assert model.booster is not None and model.booster is not prior
    assert model.booster.num_trees() > prior.num_trees()  # boosting continued: the prior's trees kept
    assert spearman(model.predict(held.feats[8:]), held.costs[8:]) > 0.8
    again = model.fresh()
    assert again.prior is prior and again.booster is None and again.trained


def test_the_held_out_evaluation_reports_each_workload_at_each_number_of_shots(families):
    rows = evaluate(families, folds=4, shots=(0, 16))
    assert {(r["workload"], r["shots"]) for r in rows} == {(f.name, n) for f in families for n in (0, 16)}
    assert all(r["test"] == (60 if r["shots"] == 0 else 44) for r in rows)
    assert np.mean([r["prior"] for r in rows]) > 0.8
    assert np.mean([r["tuned"] for r in rows if r["shots"] == 16]) > 0.8


def test_a_prior_is_read_only_for_its_feature_version_and_a_broken_one_is_refused(families, tmp_path):
    prior = train_prior(families[:4])
    save_prior(prior, {"note": "test"}, PER_STORE_FEATURES, tmp_path)
    assert load_prior(PER_STORE_FEATURES, tmp_path) is not None
    other = FeatureSet(PER_STORE_FEATURES.name, "per-store-v0-old", NUM_FEATURES, PER_STORE_FEATURES.extract)
    assert load_prior(other, tmp_path) is None  # another version: not used, no error
    narrower = FeatureSet("narrow", "narrow-v1", NUM_FEATURES - 1, PER_STORE_FEATURES.extract)
    save_prior(prior, {}, narrower, tmp_path)
    with pytest.raises(PriorError, match="reads"):
        load_prior(narrower, tmp_path)
    broken = FeatureSet("broken", "broken-v1", NUM_FEATURES, PER_STORE_FEATURES.extract)
    (tmp_path / "broken.txt").write_text("not a model\n")
    (tmp_path / "broken.json").write_text(json.dumps({"feature_version": "broken-v1"}))
    with pytest.raises(PriorError, match="not a LightGBM model"):
        load_prior(broken, tmp_path)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(PriorError, match="description"):
        load_prior(broken, tmp_path)


def test_failures_in_a_group_are_slow_and_do_not_break_training(families):
    f = families[0]
    costs = [math.inf if i % 7 == 0 else c for i, c in enumerate(f.costs)]
    prior = train_prior([WorkloadPrograms(f.key, f.name, f.op, f.feats, costs), *families[1:4]])
    assert prior.num_trees() > 0


def test_the_default_model_starts_from_the_shipped_prior_unless_switched_off(monkeypatch):
    shipped = load_prior(PER_STORE_FEATURES)
    assert shipped is not None, "the package ships a prior for the per-store features"
    assert default_cost_model().prior is shipped
    monkeypatch.setenv("TILEGRAPH_COST_MODEL_PRIOR", "0")
    assert default_cost_model().prior is None


def test_a_prior_that_does_not_load_leaves_the_default_model_blind_with_a_warning(monkeypatch, caplog):
    from tilegraph.tune.cost_model import transfer

    def broken(features):
        raise PriorError("weights/per-store.txt is not a LightGBM model (truncated)")

    monkeypatch.setattr(transfer, "load_prior", broken)
    model = default_cost_model()
    assert model.prior is None and not model.trained
    assert "not a LightGBM model" in caplog.text


def test_the_shipped_prior_ranks_a_family_of_real_programs_by_their_structure():
    """One GEMM's programs: the plain loop nest (B read down its columns in the innermost loop), the
    rows innermost (unit stride), and register tiles vectorised, parallel and unrolled: the shipped
    prior orders them as their structure does (each is faster than the one before on every CPU;
    no timing here)."""
    import tilegraph as tg
    from tilegraph.workloads import from_spec

    wl = from_spec("matmul:96,160,224")
    out = wl.outputs[0].name

    def plain():
        return tg.Schedule(wl)

    def rows_innermost():  # i, k, j: the innermost loop walks B's and C's rows
        sch = tg.Schedule(wl)
        i, j, k = sch.loops(out)
        sch.reorder(i, k, j)
        return sch

    def tiled():
        sch = tg.Schedule(wl)
        i, j, k = sch.loops(out)
        i0, i1 = sch.split(i, [None, 4])
        j0, j1 = sch.split(j, [None, 16])
        sch.reorder(i0, j0, k, i1, j1)
        sch.parallel(i0)
        sch.unroll(i1)
        sch.vectorize(j1)
        return sch

    prior = load_prior(PER_STORE_FEATURES)
    family = [plain(), rows_innermost(), tiled()]
    scores = GBTCostModel(prior=prior).predict([PER_STORE_FEATURES.extract(s.func) for s in family])
    assert list(scores) == sorted(scores), scores


def test_the_command_names_a_directory_that_is_not_a_corpus_and_exits_2(tmp_path, capsys):
    from tilegraph.tune.cost_model.transfer import main

    assert main(["evaluate", str(tmp_path)]) == 2
    assert "not a corpus directory" in capsys.readouterr().err
    (tmp_path / "corpus.json").write_text(json.dumps([{"key": "k", "source": "ops", "name": "matmul:8,8,8"}]))
    assert main(["train", str(tmp_path), "--out", str(tmp_path / "w")]) == 2  # no records.db: refused, none made
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and not (tmp_path / "records.db").exists()
    for bad in (["--shots", "a,16"], ["--shots", "-1"], ["--folds", "1"]):
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", str(tmp_path), *bad])
        assert exit_.value.code == 2 and bad[0] in capsys.readouterr().err
