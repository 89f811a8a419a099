"""random: a placeholder search that samples random legal schedules of one simple family.

For every compute block: split each loop in two with a sampled tile, order the loops
spatial-outer, reduce-outer, reduce-inner, spatial-inner, then (sampled) parallelise the outermost
spatial loop and vectorize the innermost one. Every choice is a sampling instruction, so each
candidate is a replayable trace. Useful as a baseline and for tests; "gensor" is the real search.

    before: for i, j, k: C[i, j] += A[i, k] * B[k, j]
    after:  for i_0 parallel, j_0, k_0, k_1, i_1, j_1 vectorized: ...
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from tilegraph.errors import ScheduleError
from tilegraph.loop.visit import reduce_loop_of
from tilegraph.schedule import Schedule
from tilegraph.schedule.primitives.common import get_loop
from tilegraph.schedule.trace import trace_hash
from tilegraph.te.workload import Workload
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext

MAX_INNER = 64
# Consecutive samples that brought nothing new before the space counts as exhausted.
_EXHAUSTED_AFTER = 200


def sample_schedule(workload: Workload, seed: int) -> Schedule:
    """One random member of the family (raises ScheduleError if a choice is illegal here)."""
    sch = Schedule(workload, seed=seed)
    for tensor in workload.computes:
        if tensor.name not in sch.block_names():
            continue
        loops = sch.loops(tensor.name)
        spatial = [lp for lp in loops if not reduce_loop_of(get_loop(sch.func, lp))]
        reduce = [lp for lp in loops if lp not in spatial]
        s_outer, s_inner, r_outer, r_inner = [], [], [], []
        for lp, outer, inner in [*((lp, s_outer, s_inner) for lp in spatial), *((lp, r_outer, r_inner) for lp in reduce)]:
            factors = sch.sample_tile(lp, 2, max_innermost=MAX_INNER)
            o, i = sch.split(lp, factors)
            outer.append(o)
            inner.append(i)
        order = [*s_outer, *r_outer, *r_inner, *s_inner]
        if len(order) > 1:
            sch.reorder(*order)
        if s_outer and sch.sample_categorical([0, 1]):
            sch.parallel(s_outer[0])
        if s_inner and sch.sample_categorical([0, 1]):
            sch.vectorize(s_inner[-1])
    return sch


class RandomSearch(SearchStrategy):
    name = "random"

    def __init__(self) -> None:
        self._proposed: set[str] = set()
        self._fruitless = 0
        self._rng: random.Random | None = None

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        if self._rng is None:
            self._rng = random.Random(ctx.seed)
        out: list[Candidate] = []
        while len(out) < n and self._fruitless < _EXHAUSTED_AFTER:
            try:
                sch = sample_schedule(ctx.workload, self._rng.getrandbits(32))
            except ScheduleError:
                self._fruitless += 1
                continue
            text = sch.trace.to_json()
            h = trace_hash(text)
            if h in self._proposed or h in ctx.measured:
                self._fruitless += 1
                continue
            self._fruitless = 0
            self._proposed.add(h)
            out.append(Candidate(text, None, {"strategy": self.name}))
        return out

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        return None

    def done(self) -> bool:
        return self._fruitless >= _EXHAUSTED_AFTER
