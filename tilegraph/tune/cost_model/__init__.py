"""Cost models that rank programs for the search: the protocol (base.py), the per-store features
(features.py, and gpu_features.py for GPU targets) and LightGBM (gbt.py), the default."""

from __future__ import annotations

from typing import Any

from tilegraph.tune.cost_model.base import CostModel, FeatureCache, FeatureSet


def default_cost_model(target: Any = None) -> CostModel:
    """The model a strategy ranks with when it is given none: LightGBM over the per-store features
    of the target's kind (GPU targets add the launch shape and the warp's memory behaviour),
    starting from the prior shipped for those features where there is one (transfer.py), so it
    ranks before its first measurement. TILEGRAPH_COST_MODEL_PRIOR=0 starts it blind, and so does a
    prior file that does not load (a warning names it: the prior helps a search, none needs it)."""
    import logging
    import os

    from tilegraph.tune.cost_model.gbt import GBTCostModel
    from tilegraph.tune.cost_model.transfer import PriorError, load_prior

    features = feature_set_for(target)
    prior = None
    if os.environ.get("TILEGRAPH_COST_MODEL_PRIOR", "1") != "0":
        try:
            prior = load_prior(features)
        except PriorError as err:
            logging.getLogger(__name__).warning("cost model: %s; the search starts without a prior", err)
    return GBTCostModel(feature_set=features, prior=prior)


def feature_set_for(target: Any = None) -> FeatureSet:
    """The per-store feature set of a target's kind (CPU when None)."""
    from tilegraph.runtime.backends import backend_for

    if target is not None and backend_for(target).is_gpu:
        from tilegraph.tune.cost_model.gpu_features import GPU_PER_STORE_FEATURES

        return GPU_PER_STORE_FEATURES
    from tilegraph.tune.cost_model.features import PER_STORE_FEATURES

    return PER_STORE_FEATURES


__all__ = ["CostModel", "FeatureCache", "FeatureSet", "default_cost_model", "feature_set_for"]
