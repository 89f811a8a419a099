"""seeded: given candidates first, then another strategy's.

    strategy = SeededStrategy([default_candidate(wl, target)], GensorStrategy(top_k=24))

Whole-model tuning seeds each task with its default schedule, so the "before" latency is measured
the same way as every candidate and a task's best record is never slower than what an untuned
compile would run.
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph.runtime.backends import backend_for
from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext


def default_candidate(workload: Workload, target: Target) -> Candidate:
    """The default schedule of `workload` on `target` as a candidate (meta strategy "default")."""
    sch = backend_for(target).default_schedule(workload, target)
    return Candidate(sch.trace.to_json(), None, {"strategy": "default"})


class SeededStrategy(SearchStrategy):
    def __init__(self, seeds: Sequence[Candidate], inner: SearchStrategy):
        self._seeds = list(seeds)
        self.inner = inner
        self.name = inner.name

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        batch, self._seeds = self._seeds[:n], self._seeds[n:]
        if len(batch) < n:
            batch += self.inner.propose(ctx, n - len(batch))
        return batch

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        self.inner.notify(ctx, candidates, results)

    def done(self) -> bool:
        return not self._seeds and self.inner.done()


__all__ = ["SeededStrategy", "default_candidate"]
