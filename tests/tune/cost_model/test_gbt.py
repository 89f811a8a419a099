"""The gradient-boosted cost model learns a ranking, waits for its warm-up, and survives failures."""

import math

import numpy as np
from scipy.stats import spearmanr

from tilegraph.tune.cost_model.features import NUM_FEATURES
from tilegraph.tune.cost_model.gbt import GBTCostModel


def _programs(n, seed):
    rng = np.random.default_rng(seed)
    progs = [rng.random((int(rng.integers(1, 4)), NUM_FEATURES)).astype(np.float32) for _ in range(n)]
    # a synthetic cost: more of features 3 and 10 summed over the stores is faster
    costs = [1.0 / (0.1 + p[:, 3].sum() + 0.5 * p[:, 10].sum()) for p in progs]
    return progs, costs


def test_learns_a_synthetic_ranking_on_held_out_programs():
    progs, costs = _programs(200, 0)
    model = GBTCostModel()
    model.update(progs[:128], costs[:128], "w")
    scores = model.predict(progs[128:])
    assert spearmanr(scores, [-c for c in costs[128:]]).statistic > 0.8


def test_untrained_until_the_warmup_and_failures_count_as_slow():
    progs, costs = _programs(40, 1)
    model = GBTCostModel(warmup=16)
    model.update(progs[:10], costs[:10], "w")
    assert not model.trained and model.predict(progs[:3]) is None
    model.update(progs[10:30], [math.inf if i % 5 == 0 else c for i, c in enumerate(costs[10:30])], "w")
    assert model.trained and len(model) == 30
    labels = model.labels()
    assert labels.max() == 1.0 and (labels[10::5] == 0).all()
    assert model.predict(progs[30:]).shape == (10,)


def test_a_training_failure_leaves_the_model_untrained_instead_of_raising(monkeypatch):
    import lightgbm

    def fail(*args, **kwargs):
        raise lightgbm.basic.LightGBMError("Check failed: (best_split_info.left_count) > (0)")

    monkeypatch.setattr(lightgbm, "train", fail)
    progs, costs = _programs(20, 2)
    model = GBTCostModel(warmup=4)
    model.update(progs, costs, "w")
    assert not model.trained and model.predict(progs[:2]) is None


def test_lightgbm_is_a_cost_model_of_one_feature_set():
    """The protocol (cost_model/base.py): fresh() keeps the settings and the feature set, and rows of
    another width are not learnt from."""
    from tilegraph.tune.cost_model import CostModel
    from tilegraph.tune.cost_model.features import PER_STORE_FEATURES

    model = GBTCostModel(warmup=4)
    assert isinstance(model, CostModel) and model.feature_set is PER_STORE_FEATURES
    assert model.feature_set.width == NUM_FEATURES and str(NUM_FEATURES) in model.feature_set.version
    fresh = model.fresh()
    assert fresh.warmup == 4 and fresh.feature_set is model.feature_set and not fresh.trained
    model.add([np.ones((2, NUM_FEATURES + 1), np.float32)], [1e-3], "w")
    assert len(model) == 0
