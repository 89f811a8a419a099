"""TuneSession: one builder, runner and database shared by many short tuning slices.

    with TuneSession("cpu", db, num_threads=2) as session:
        got = session.tune_slice(workload, strategy, trials=4, deadline=time.monotonic() + 10)
        got.measured, got.best_s, got.seconds
        session.best(workload)        # the fastest ok record, earlier runs included

Whole-model tuning (graph/tuning/scheduler.py) gives each task many slices of a few
measurements; building worker pools and a runner per slice would cost more than the slice. A
slice is `tg.tune`'s loop (tune.search_loop) with the same guarantees: every result is committed
in its own transaction as it is measured, and a trace recorded for the workload and target (by
this run or an earlier one) is never measured again.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tilegraph.runtime.backends import require_runnable
from tilegraph.te.workload import Workload
from tilegraph.tune.builder import Builder
from tilegraph.tune.database import Database, Record, open_database
from tilegraph.tune.measure import resolve_target
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.runner import Runner
from tilegraph.tune.strategy.base import SearchStrategy, TuneContext
from tilegraph.tune.tune import search_loop


@dataclass
class SliceResult:
    measured: int                 # new measurements this slice (recorded traces are not re-measured)
    best_s: float | None          # the workload's best ok latency after the slice (all runs)
    seconds: float                # wall time of the slice, search included
    counts: Counter[str] = field(default_factory=Counter)  # measurements by result kind


class _Silent:
    def update(self, run: Any, elapsed_s: float) -> None:
        pass


class TuneSession:
    """Builder, runner and database for many slices; close() (or `with`) releases the workers."""

    def __init__(self, target: Any = "cpu", db: Database | str | None = None, options: TuneOptions | None = None,
                 **option_fields: Any):
        self.options = (options or TuneOptions()).updated(**option_fields)
        self.target = resolve_target(target)
        require_runnable(self.target, timed=True)
        self.fingerprint = str(self.target.fingerprint)
        self.db = open_database(db)
        build_target = target if isinstance(target, str) else self.target
        opts = self.options
        self._own = (opts.builder is None, opts.runner is None)
        self.builder = opts.builder or Builder(opts.build_workers, opts.build_timeout_s, build_target)
        self.runner = opts.runner or Runner(opts.policy, opts.reference, target=build_target)

    def measured_hashes(self, workload: Workload) -> set[str]:
        return self.db.measured_hashes(workload.key, self.fingerprint)

    def records(self, workload: Workload) -> list[Record]:
        return list(self.db.records(workload.key, self.fingerprint))

    def best(self, workload: Workload) -> Record | None:
        return self.db.best(workload.key, self.fingerprint)

    def tune_slice(self, workload: Workload, strategy: SearchStrategy, trials: int, deadline: float | None = None,
                   seed: int | None = None) -> SliceResult:
        """Up to `trials` new measurements of `workload` proposed by `strategy` (which keeps its
        state between slices), stopping at `deadline` (time.monotonic()) after at least one."""
        start = time.monotonic()
        self.db.commit_workload(workload)
        ctx = TuneContext(workload, self.target, self.options.seed if seed is None else seed, self.db,
                          self.measured_hashes(workload), trials, deadline, self.options.num_threads)
        counts: Counter[str] = Counter()
        search_loop(strategy, ctx, self.builder, self.runner, self.db, self.options.batch_size, counts, _Silent(),
                    start)
        best = self.best(workload)
        return SliceResult(sum(counts.values()), None if best is None else best.latency_s,
                           time.monotonic() - start, counts)

    def close(self) -> None:
        if self._own[0]:
            self.builder.close()
        if self._own[1]:
            self.runner.close()

    def __enter__(self) -> TuneSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SliceResult", "TuneSession"]
