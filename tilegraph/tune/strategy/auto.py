"""auto: Gensor first, then evolutionary search seeded with what Gensor measured, while budget remains.

    tg.tune(wl, time_budget=60)          # strategy="auto" is the default

Gensor's ranked candidates are measured first (its kernels in seconds), so the result is never
worse than this run's Gensor phase: the best record wins and Gensor's are among them. (Another
Gensor run may pick other candidates: its walk is time-budgeted; docs/performance.md.) When a trial or time budget
is left after them, EvolutionarySearch takes over with Gensor's measured programs in its population
(mutated like any other) and in its cost model's training data; a quarter of each batch (at least
one where a batch has two or more) is Gensor's own walk continued from the fastest measured Gensor
states (strategy/markov_mutation.py: the sketches cannot express Gensor's micro-kernels, so only
this improves them). Without any budget auto is Gensor.
The same on every target: the evolutionary phase samples the target's design space (space_for:
the CPU sketches, or the GPU sketches of tune/space/gpu_sketch.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from tilegraph.schedule.trace import trace_hash
from tilegraph.tune.gensor.state import EtirState
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext
from tilegraph.tune.strategy.evolutionary import EvolutionarySearch
from tilegraph.tune.strategy.gensor import GensorStrategy
from tilegraph.tune.strategy.markov_mutation import MarkovMutator

MARKOV_SHARE = 0.25  # of each evolutionary-phase batch: children of measured Gensor states


class AutoStrategy(SearchStrategy):
    name = "auto"

    def __init__(self, gensor: SearchStrategy | None = None, evolution: EvolutionarySearch | None = None):
        self.gensor = gensor or GensorStrategy()
        self.evolution = evolution or EvolutionarySearch()
        self.phase = "gensor"
        self._gensor_seen: list[tuple[Candidate, RunResult]] = []
        self.markov: MarkovMutator | None = None
        self._markov_proposed: set[str] = set()

    def _switch(self, ctx: TuneContext) -> None:
        self.phase = "evolutionary" if ctx.has_budget else "done"
        if self.phase == "evolutionary":
            cands, results = zip(*self._gensor_seen) if self._gensor_seen else ((), ())
            self.evolution.seeds = [c.trace_json for c in cands]
            self.evolution.learn(ctx, cands, results)
            setup = getattr(self.gensor, "setup", None)  # None: no walk to continue (GPU, attention)
            if setup is not None:
                self.markov = MarkovMutator(setup, random.Random((ctx.seed or 0) * 7919 + 1), self.name)
                self._markov_learn(cands, results)

    def _markov_learn(self, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        for cand, res in zip(candidates, results):
            state = cand.meta.get("state")
            if self.markov is not None and isinstance(state, dict):
                self.markov.measured(EtirState.from_dict(state), res.median if res.ok and res.median else math.inf)

    def _markov_fresh(self, ctx: TuneContext, trace_json: str) -> bool:
        h = trace_hash(trace_json)
        if h in ctx.measured or h in self._markov_proposed:
            return False
        self._markov_proposed.add(h)
        return True

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        if self.phase == "gensor":
            batch = self.gensor.propose(ctx, n)
            if batch:
                return batch
            self._switch(ctx)
        if self.phase == "evolutionary":
            children: list[Candidate] = []
            if self.markov is not None and n > 1:
                children = self.markov.propose(max(1, round(MARKOV_SHARE * n)),
                                               lambda trace_json: self._markov_fresh(ctx, trace_json))
            return children + self.evolution.propose(ctx, n - len(children))
        return []

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        if self.phase == "gensor":
            self.gensor.notify(ctx, candidates, results)
            self._gensor_seen += list(zip(candidates, results))
        elif self.phase == "evolutionary":
            self._markov_learn(candidates, results)
            self.evolution.notify(ctx, candidates, results)

    def done(self) -> bool:
        if self.phase == "gensor":
            return False  # propose switches phase when Gensor runs dry
        return self.phase == "done" or self.evolution.done()


__all__ = ["AutoStrategy"]
