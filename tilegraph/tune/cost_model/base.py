"""The cost-model protocol: what a search strategy asks of a model that ranks programs.

    model = GBTCostModel()                            # the implementation beside this file (LightGBM)
    feats = model.feature_set.extract(program.func)   # one feature matrix per program
    model.update([feats, ...], [seconds, ...], group=workload.key)   # fit on measured programs
    scores = model.predict([feats, ...])              # higher = faster; None until trained
    model.fresh()                                     # an untrained model with the same settings

A model reads the features of exactly one FeatureSet (a name, a version, a width and the function
that extracts them from a scheduled program). Its `version` goes into the meta of every record a
model ranked (`"features"`), so measurements ranked under different features are told apart, and
a model refuses rows of another width. Strategies take any CostModel (`EvolutionarySearch(model=)`),
and never construct LightGBM themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class FeatureSet:
    name: str
    version: str  # changes whenever a column's meaning does: recorded with every ranked measurement
    width: int  # columns per row
    extract: Callable[[Any], np.ndarray]  # scheduled loop IR Func -> (rows, width) float32


@runtime_checkable
class CostModel(Protocol):
    name: str
    feature_set: FeatureSet

    @property
    def trained(self) -> bool: ...

    def fresh(self) -> CostModel:
        """An untrained model with this one's settings (strategies retrain from scratch on new data)."""

    def add(self, programs: Sequence[np.ndarray], costs: Sequence[float], group: str = "") -> None:
        """Measured programs (feature matrices, seconds; inf for failures) kept for the next fit."""

    def update(self, programs: Sequence[np.ndarray], costs: Sequence[float], group: str = "") -> None:
        """add(), then fit on everything added."""

    def predict(self, programs: Sequence[np.ndarray]) -> np.ndarray | None:
        """One score per program, higher = faster; None while untrained."""


class FeatureCache:
    """A feature set's matrix of a program by its trace: a search scores the same program many
    times and featurises it once. Takes anything with `trace_json` and `func` (space/program.Program)."""

    def __init__(self, feature_set: FeatureSet) -> None:
        self.feature_set = feature_set
        self._by_trace: dict[str, np.ndarray] = {}

    def __call__(self, program: Any) -> np.ndarray:
        feats = self._by_trace.get(program.trace_json)
        if feats is None:
            feats = self.feature_set.extract(program.func)
            self._by_trace[program.trace_json] = feats
        return feats


__all__ = ["CostModel", "FeatureCache", "FeatureSet"]
