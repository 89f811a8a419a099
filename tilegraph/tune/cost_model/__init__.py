"""Cost models that rank programs for the search: the protocol (base.py), the per-store features
(features.py) and LightGBM (gbt.py), the default."""

from __future__ import annotations

from tilegraph.tune.cost_model.base import CostModel, FeatureCache, FeatureSet


def default_cost_model() -> CostModel:
    """The model a strategy ranks with when it is given none: LightGBM over per-store features."""
    from tilegraph.tune.cost_model.gbt import GBTCostModel

    return GBTCostModel()


__all__ = ["CostModel", "FeatureCache", "FeatureSet", "default_cost_model"]
