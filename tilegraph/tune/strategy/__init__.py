"""Search strategies, by name. Another strategy registers itself here: STRATEGIES["name"] = factory.

A factory takes no arguments and returns a fresh SearchStrategy (one per tuning run).
"""

from __future__ import annotations

from collections.abc import Callable

from tilegraph.tune.strategy.auto import AutoStrategy
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext
from tilegraph.tune.strategy.evolutionary import EvolutionarySearch
from tilegraph.tune.strategy.gensor import GensorStrategy
from tilegraph.tune.strategy.random_search import RandomSearch
from tilegraph.tune.strategy.roller import RollerStrategy
from tilegraph.tune.strategy.tlm import TLMStrategy

STRATEGIES: dict[str, Callable[[], SearchStrategy]] = {
    "random": RandomSearch,
    "gensor": GensorStrategy,
    "roller": RollerStrategy,
    "evolutionary": EvolutionarySearch,
    "auto": AutoStrategy,
    "tlm": TLMStrategy,  # needs torch (tilegraph[tlm]) and the shipped model
}


def get_strategy(name: str) -> SearchStrategy:
    """A fresh strategy by name; a clear error lists the registered ones."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown search strategy {name!r}; available: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]()


__all__ = ["STRATEGIES", "Candidate", "SearchStrategy", "TuneContext", "RandomSearch", "GensorStrategy", "RollerStrategy",
           "EvolutionarySearch", "AutoStrategy", "TLMStrategy",
           "get_strategy"]
