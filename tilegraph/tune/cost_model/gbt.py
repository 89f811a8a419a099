"""GBTCostModel: gradient-boosted trees (LightGBM) over per-store features, Ansor's pack-sum loss.

    model = GBTCostModel()
    model.update(programs, costs, group="GMM-4 key")    # feature matrices (one per program) + measured seconds
    scores = model.predict(programs)                   # higher = faster; None until trained

Each store gets a score from the trees; a program's score is the sum over its stores ("pack-sum").
Labels are normalised throughput per group (workload): best cost in the group / this cost, in (0, 1].
The loss is Ansor's weighted squared error on the pack-sum, weighted by the label itself so fast
programs count more: loss = y * (sum_s f(s) - y)^2, a custom LightGBM objective
(gradient (sum - y) * y for every store row of the program, hessian y). Retrained from scratch on
every update (a tuning run has at most a few thousand programs). Until `warmup` programs have been
measured, predict returns None and the search ranks by random scores (Ansor does the same).

With a `prior` (a booster trained on other workloads' programs, transfer.py; default_cost_model
loads the shipped one) the model ranks with the prior from the start, and once PRIOR_WARMUP
programs are measured it fine-tunes: FINE_TUNE_ROUNDS more trees boosted from the prior's scores
(LightGBM's init_model), so a workload's own measurements correct the prior without replacing it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.tune.cost_model.base import FeatureSet
from tilegraph.tune.cost_model.features import PER_STORE_FEATURES

log = logging.getLogger(__name__)

WARMUP = 16  # measured programs before the model is trusted (Ansor: 100, scaled to our budgets)
PARAMS = {
    # Ansor's XGBoost settings where LightGBM has them; min_child_weight 1e-3 instead of 0: with the
    # custom objective a zero-hessian leaf makes LightGBM abort ("best_split_info.left_count > 0")
    "max_depth": 10, "learning_rate": 0.2, "min_gain_to_split": 1e-3, "min_child_weight": 1e-3,
    "min_data_in_leaf": 2, "num_leaves": 63, "verbose": -1, "num_threads": 1, "deterministic": True,
    "feature_pre_filter": False, "seed": 0,
}
ROUNDS = 200
# With a prior (transfer.py) the model ranks from the first program and fine-tunes once it has
# measured PRIOR_WARMUP, with fewer rounds: a few programs of one workload correct the prior, they
# do not replace it
PRIOR_WARMUP = 8
FINE_TUNE_ROUNDS = 40


class GBTCostModel:
    """A CostModel (cost_model/base.py) over the per-store features."""

    name = "lightgbm"

    def __init__(self, warmup: int | None = None, rounds: int | None = None,
                 feature_set: FeatureSet = PER_STORE_FEATURES, prior: Any = None, params: dict[str, Any] | None = None):
        self.feature_set = feature_set
        self.prior = prior  # a Booster trained on other workloads (transfer.py): ranks until this one trains
        self.params = dict(PARAMS, **(params or {}))
        # unless given: a prior's continuation trains sooner and shorter than a model from scratch
        self.warmup = warmup if warmup is not None else WARMUP if prior is None else PRIOR_WARMUP
        self.rounds = rounds if rounds is not None else ROUNDS if prior is None else FINE_TUNE_ROUNDS
        self._programs: list[np.ndarray] = []
        self._costs: list[float] = []
        self._groups: list[str] = []
        self._booster = None

    @property
    def trained(self) -> bool:
        return self._booster is not None or self.prior is not None

    @property
    def booster(self) -> Any:
        """The trained LightGBM booster (None until trained; with a prior, its fine-tuned continuation)."""
        return self._booster

    def fresh(self) -> GBTCostModel:
        return GBTCostModel(self.warmup, self.rounds, self.feature_set, self.prior, self.params)

    def __len__(self) -> int:
        return len(self._programs)

    def update(self, programs: Sequence[np.ndarray], costs: Sequence[float], group: str = "") -> None:
        """Add measured programs (cost in seconds; inf or nan for failures, kept as label 0) and retrain."""
        self.add(programs, costs, group)
        if sum(math.isfinite(c) for c in self._costs) >= self.warmup:
            self._train()

    def add(self, programs: Sequence[np.ndarray], costs: Sequence[float], group: str = "") -> None:
        """Add measured programs without retraining (the next update trains on everything)."""
        for feats, cost in zip(programs, costs):
            if feats.ndim != 2 or feats.shape[1] != self.feature_set.width or feats.shape[0] == 0:
                continue
            self._programs.append(feats)
            self._costs.append(float(cost) if cost is not None and math.isfinite(cost) and cost > 0 else math.inf)
            self._groups.append(group)

    def labels(self) -> np.ndarray:
        best: dict[str, float] = {}
        for g, c in zip(self._groups, self._costs):
            if math.isfinite(c):
                best[g] = min(best.get(g, math.inf), c)
        return np.array([best[g] / c if math.isfinite(c) and g in best else 0.0
                         for g, c in zip(self._groups, self._costs)])

    def _train(self) -> None:
        import lightgbm as lgb

        y = self.labels()
        rows = np.concatenate(self._programs)
        owner = np.concatenate([np.full(len(p), i) for i, p in enumerate(self._programs)])
        weight = np.maximum(y, 0.05)  # failures still teach "slow", with a small weight

        def packsum_objective(preds: np.ndarray, data: object) -> tuple[np.ndarray, np.ndarray]:
            sums = np.bincount(owner, weights=preds, minlength=len(y))
            grad = (sums - y)[owner] * weight[owner]
            hess = weight[owner]
            return grad, hess

        params = dict(self.params, objective=packsum_objective)
        data = lgb.Dataset(rows, label=np.zeros(len(rows)), free_raw_data=False)
        try:  # with a prior, boosting goes on from its scores (init_model): fine-tuning, not replacing
            self._booster = lgb.train(params, data, num_boost_round=self.rounds, init_model=self.prior)
        except lgb.basic.LightGBMError as err:  # a model that cannot train never stops a tuning run
            log.warning("cost model: training on %d programs failed (%s); the search keeps its previous model",
                        len(self._programs), str(err)[:120])

    def predict(self, programs: Sequence[np.ndarray]) -> np.ndarray | None:
        """Pack-sum scores (higher = faster), or None while untrained (and without a prior)."""
        booster = self._booster if self._booster is not None else self.prior
        if booster is None or not programs:
            return None
        sizes = [len(p) for p in programs]
        rows = np.concatenate([p if len(p) else np.zeros((0, self.feature_set.width), np.float32) for p in programs])
        if len(rows) == 0:
            return np.zeros(len(programs))
        preds = booster.predict(rows)
        owner = np.concatenate([np.full(n, i) for i, n in enumerate(sizes)])
        return np.bincount(owner, weights=preds, minlength=len(programs))
