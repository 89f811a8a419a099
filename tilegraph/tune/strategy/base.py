"""The search-strategy protocol `tg.tune` drives.

    class MyStrategy(SearchStrategy):
        name = "mine"
        def propose(self, ctx, n):            # up to n new candidates (trace JSON + optional prediction)
            ...
        def notify(self, ctx, candidates, results):   # measured results, same order as candidates
            ...
        def done(self):                        # True once the strategy has nothing more to propose
            ...

    STRATEGIES["mine"] = MyStrategy            # tilegraph/tune/strategy/__init__.py

tune() skips candidates whose trace is already in ctx.measured (resume), builds and runs the rest,
commits every result and then calls notify. Results are RunResult objects (kind, samples, median).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.result import RunResult

if TYPE_CHECKING:
    from tilegraph.tune.database import Database


@dataclass(frozen=True)
class Candidate:
    trace_json: str
    predicted: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class TuneContext:
    """What a strategy may look at: the problem, the database and the budget left."""

    workload: Workload
    target: Target
    seed: int
    db: Database | None
    measured: set[str] = field(default_factory=set)  # trace hashes recorded for this workload + target
    trials_left: int | None = None
    deadline: float | None = None  # time.monotonic() value, or None for no time budget
    num_threads: int | None = None
    # whether the user set a budget: tg.tune without one still caps the trials (DEFAULT_TRIALS), but
    # a strategy that can go on for ever (auto's evolutionary phase) stops where it would naturally;
    # None: a budget is set when trials_left or deadline is
    budget_given: bool | None = None

    @property
    def has_budget(self) -> bool:
        if self.budget_given is not None:
            return self.budget_given
        return self.trials_left is not None or self.deadline is not None

    @property
    def time_left_s(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    @property
    def target_fingerprint(self) -> str:
        return str(self.target.fingerprint)


class SearchStrategy:
    """Base class; subclasses override propose and usually notify/done."""

    name: str = "base"

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        raise NotImplementedError

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        """Learn from measurements (default: ignore them)."""

    def done(self) -> bool:
        return False
