"""tg.tune: search schedules for a workload, measure them safely, keep every result.

    result = tg.tune(wl, time_budget=60)          # or trials=200, strategy="random", db="my.db" (tune/options.py)
    result = tg.tune(wl, target="opencl")         # GPU targets: the runner rebuilds each kernel per target
    result = tg.tune(wl, Target("cpu", arch="aarch64"), trials=4)   # checked under qemu, not timed (checked_only.py)
    result.kernel(*inputs); result.latency_s; result.gflops; result.trace

Everything is measured through one TuneSession (tune/session.py, the one measurer): its search
loop (tune/search_loop.py) proposes, skips traces recorded by earlier runs, builds in worker
processes, checks and times in the isolated runner and commits each result as it comes. The
best "ok" record (earlier runs included) is rebuilt here and checked once more.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tilegraph.te.workload import Workload
from tilegraph.testing.data import require_memory
from tilegraph.tune.checked_only import tune_checked_only
from tilegraph.tune.database import Database
from tilegraph.tune.measure import resolve_target
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.result import RunResult, TuneResult
from tilegraph.tune.retime import SETTLE_SHARE
from tilegraph.tune.session import TuneSession
from tilegraph.tune.strategy import SearchStrategy, get_strategy


def resolve_workload(workload: Workload | str, batch: int = 1) -> Workload:
    """A Workload from itself, a suite id ("GMM-4") or an "op:shape" spec ("matmul:512,256,384")."""
    if isinstance(workload, Workload):
        return workload
    if not isinstance(workload, str):
        raise TypeError(f"workload must be a tg.Workload or a string id/spec, got {type(workload).__name__}")
    from tilegraph import workloads

    if ":" in workload:
        return workloads.from_spec(workload)
    return workloads.get(workload, batch=batch)


def tune(workload: Workload | str, target: Any = "cpu", db: Database | str | None = None,
         options: TuneOptions | None = None, **option_fields: Any) -> TuneResult:
    """Tune `workload` and return the best kernel found (see the module docstring). Everything else
    is a TuneOptions field, given as `options=` or as keywords (strategy=, time_budget=, trials=,
    seed=, progress=, num_threads=, batch_size=, policy=, reference=, builder=, runner=, ...)."""
    opts = (options or TuneOptions()).updated(**option_fields)
    wl = resolve_workload(workload)
    tgt = resolve_target(target)
    search = opts.strategy if isinstance(opts.strategy, SearchStrategy) else get_strategy(opts.strategy)
    require_memory(wl)
    start = time.monotonic()
    with TuneSession(target if isinstance(target, str) else tgt, db, opts) as session:
        if not session.timed:  # another architecture under an emulator: checked, never timed or stored
            return tune_checked_only(wl, session, search)
        runners = getattr(session.runner, "slots", None) if opts.cluster is not None else None
        bar = _Progress(opts.progress, wl, opts.trial_limit, opts.time_budget, runners)
        # with a time budget, its last SETTLE_SHARE re-times the few best against each other (retime.py)
        end = None if opts.time_budget is None else start + opts.time_budget
        try:
            got = session.tune_slice(wl, search, opts.trial_limit,
                                     None if end is None else end - SETTLE_SHARE * opts.time_budget,
                                     progress=bar, budget_given=opts.trials is not None or opts.time_budget is not None)
            if end is not None:
                session.retime_best(wl, deadline=end)
            kernel, best = session.best_kernel(wl)
        finally:
            bar.close()
    failures = {k: v for k, v in got.counts.items() if k != "ok"}
    from tilegraph.schedule import Trace

    return TuneResult(kernel, Trace.from_json(best.trace_json), best.latency_s, wl.flops() / best.latency_s / 1e9,
                      got.measured, sum(failures.values()), time.monotonic() - start, search.name, wl.key, failures,
                      profile=session.profile)


# ---------------------------------------------------------------------------- progress display
class _Progress:
    """A rich progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self, enabled: bool, wl: Workload, trials: int | None, time_budget: float | None,
                 runners: int | None = None):
        self._bar: Any = None
        self.best: float | None = None
        if not enabled or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._by_time = trials is None
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"),
                             TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self._bar.start()
        where = "" if runners is None else f" on {runners} cluster runner{'s' * (runners != 1)}"
        self._task = self._bar.add_task(f"tuning {wl.op_name}{where}", total=float(time_budget if self._by_time else trials),
                                        status="")
        self._n = 0
        self._failed = 0

    def update(self, run: RunResult, elapsed_s: float) -> None:
        if self._bar is None:
            return
        self._n += 1
        self._failed += not run.ok
        if run.ok and run.median is not None and (self.best is None or run.median < self.best):
            self.best = run.median
        best = "-" if self.best is None else f"{self.best * 1e6:.1f} us"
        status = f"{self._n} measured, {self._failed} failed, best {best}"
        self._bar.update(self._task, completed=elapsed_s if self._by_time else self._n, status=status)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
