"""auto: Gensor first, then evolutionary search seeded with what Gensor measured, while budget remains.

    tg.tune(wl, time_budget=60)          # strategy="auto" is the default

Gensor's ranked candidates are measured first (its kernels in seconds), so the result is never
worse than this run's Gensor phase: the best record wins and Gensor's are among them. (Another
Gensor run may pick other candidates: its walk is time-budgeted; docs/performance.md.) When a trial or time budget
is left after them, EvolutionarySearch takes over with Gensor's measured programs in its population
(mutated like any other) and in its cost model's training data. Without any budget auto is Gensor.
The same on every target: the evolutionary phase samples the target's design space (space_for:
the CPU sketches, or the GPU sketches of tune/space/gpu_sketch.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext
from tilegraph.tune.strategy.evolutionary import EvolutionarySearch
from tilegraph.tune.strategy.gensor import GensorStrategy


class AutoStrategy(SearchStrategy):
    name = "auto"

    def __init__(self, gensor: SearchStrategy | None = None, evolution: EvolutionarySearch | None = None):
        self.gensor = gensor or GensorStrategy()
        self.evolution = evolution or EvolutionarySearch()
        self.phase = "gensor"
        self._gensor_seen: list[tuple[Candidate, RunResult]] = []

    def _switch(self, ctx: TuneContext) -> None:
        self.phase = "evolutionary" if ctx.has_budget else "done"
        if self.phase == "evolutionary":
            cands, results = zip(*self._gensor_seen) if self._gensor_seen else ((), ())
            self.evolution.seeds = [c.trace_json for c in cands]
            self.evolution.learn(ctx, cands, results)

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        if self.phase == "gensor":
            batch = self.gensor.propose(ctx, n)
            if batch:
                return batch
            self._switch(ctx)
        if self.phase == "evolutionary":
            return self.evolution.propose(ctx, n)
        return []

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        if self.phase == "gensor":
            self.gensor.notify(ctx, candidates, results)
            self._gensor_seen += list(zip(candidates, results))
        elif self.phase == "evolutionary":
            self.evolution.notify(ctx, candidates, results)

    def done(self) -> bool:
        if self.phase == "gensor":
            return False  # propose switches phase when Gensor runs dry
        return self.phase == "done" or self.evolution.done()


__all__ = ["AutoStrategy"]
