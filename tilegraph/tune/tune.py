"""tg.tune: search schedules for a workload, measure them safely, keep every result.

    result = tg.tune(wl, time_budget=60)          # or trials=200, strategy="random", db="my.db" (tune/options.py)
    result = tg.tune(wl, target="opencl")         # GPU targets: the runner rebuilds each kernel per target
    result = tg.tune(wl, Target("cpu", arch="aarch64"), trials=4)   # checked under qemu, not timed (checked_only.py)
    result.kernel(*inputs); result.latency_s; result.gflops; result.trace

Loop: propose -> skip traces already recorded for this workload and target (resume) -> build the
batch in worker processes -> check and time each in the isolated runner (a candidate faster than
the best so far is measured twice and keeps the slower median) -> commit each result in its own
transaction -> notify the strategy. Stops at the trial or time budget or when the strategy
is done. The best "ok" record (earlier runs included) is rebuilt here and checked once more.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from typing import Any

from tilegraph.errors import TilegraphError
from tilegraph.runtime.backends import backend_for, require_runnable
from tilegraph.schedule.trace import trace_hash
from tilegraph.te.workload import Workload
from tilegraph.testing.data import require_memory
from tilegraph.tune.builder import Builder
from tilegraph.tune.checked_only import tune_checked_only
from tilegraph.tune.database import Database, Record, open_database
from tilegraph.tune.measure import MeasureInput, compare_outputs, random_inputs, resolve_target
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.result import RunResult, TuneResult
from tilegraph.tune.runner import Runner
from tilegraph.tune.strategy import SearchStrategy, get_strategy
from tilegraph.tune.strategy.base import Candidate, TuneContext

log = logging.getLogger("tilegraph.tune")

_EMPTY_ROUNDS_LIMIT = 3


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
    fp = str(tgt.fingerprint)
    search = opts.strategy if isinstance(opts.strategy, SearchStrategy) else get_strategy(opts.strategy)
    require_memory(wl)
    if not backend_for(tgt).timeable:  # another architecture under an emulator: checked, never timed or stored
        require_runnable(tgt)
        return tune_checked_only(wl, tgt, search, opts)
    require_runnable(tgt, timed=True)  # candidates are run and timed: refuse a missing device before any work
    database = open_database(db)
    database.commit_workload(wl)

    start = time.monotonic()
    trials = opts.trial_limit
    ctx = TuneContext(wl, tgt, opts.seed, database, database.measured_hashes(wl.key, fp), trials,
                      None if opts.time_budget is None else start + opts.time_budget, opts.num_threads,
                      budget_given=opts.trials is not None or opts.time_budget is not None)
    counts: Counter[str] = Counter()
    bar = _Progress(opts.progress, wl, trials, opts.time_budget)
    build_target = target if isinstance(target, str) else tgt
    builder = opts.builder or Builder(opts.build_workers, opts.build_timeout_s, build_target)
    runner = opts.runner or Runner(opts.policy, opts.reference, target=build_target)
    try:
        search_loop(search, ctx, builder, runner, database, opts.batch_size, counts, bar, start)
        kernel, best = _best_kernel(wl, tgt, database, builder, runner)
    finally:
        bar.close()
        if opts.builder is None:
            builder.close()
        if opts.runner is None:
            runner.close()
    elapsed = time.monotonic() - start
    measured = sum(counts.values())
    failures = {k: v for k, v in counts.items() if k != "ok"}
    return TuneResult(kernel, _trace_of(best), best.latency_s, wl.flops() / best.latency_s / 1e9, measured,
                      sum(failures.values()), elapsed, search.name, wl.key, failures)


def search_loop(search: SearchStrategy, ctx: TuneContext, builder: Any, runner: Any, db: Database,
                batch_size: int, counts: Counter[str], bar: Any, start: float) -> None:
    """Propose, build, check, time and record until ctx's trial or time budget is spent or the
    strategy is done; traces in ctx.measured are never measured again (the strategy is told their
    recorded results). `counts` gains one per measurement by result kind; `bar.update` sees each."""
    wl, fp = ctx.workload, ctx.target_fingerprint
    empty_rounds = 0
    measured_here = 0
    per_candidate_s: float | None = None  # wall time of a round / its candidates (search, build, run)
    recorded_best = db.best(wl.key, fp)
    best_s = recorded_best.latency_s if recorded_best is not None else None

    def out_of_budget() -> bool:
        if ctx.trials_left is not None and ctx.trials_left <= 0:
            return True
        return ctx.deadline is not None and time.monotonic() >= ctx.deadline and measured_here > 0

    while not out_of_budget() and not search.done():
        n = batch_size if ctx.trials_left is None else min(batch_size, ctx.trials_left)
        left = ctx.time_left_s
        if left is not None and per_candidate_s:  # near the deadline: no more than fits in the time left
            n = max(1, min(n, int(left / per_candidate_s)))
        round_start = time.monotonic()
        proposed = search.propose(ctx, n)
        fresh: list[Candidate] = []
        seen: set[str] = set()
        known: list[Candidate] = []
        for cand in proposed:
            h = trace_hash(cand.trace_json)
            if h in ctx.measured:
                known.append(cand)
            elif h not in seen:
                seen.add(h)
                fresh.append(cand)
        if known:  # resumed: the strategy still learns what earlier runs measured
            search.notify(ctx, known, [_recorded_result(db, wl.key, fp, c.trace_json) for c in known])
        if not fresh:
            empty_rounds += 1
            if empty_rounds >= _EMPTY_ROUNDS_LIMIT:
                break
            continue
        empty_rounds = 0
        builds = builder.build([MeasureInput(wl, c.trace_json, c.meta) for c in fresh])
        done_cands: list[Candidate] = []
        results: list[RunResult] = []
        for n_cand, (cand, build) in enumerate(zip(fresh, builds)):
            if out_of_budget():
                break
            run = runner.run(wl, build, seed=_check_seed(ctx.seed, len(ctx.measured) + n_cand))
            if run.ok and run.median is not None and best_s is not None and run.median < best_s:
                run = _confirmed(runner, wl, build, run, _check_seed(ctx.seed + 1, len(ctx.measured) + n_cand))
            if run.ok and run.median is not None and (best_s is None or run.median < best_s):
                best_s = run.median
            meta = dict(cand.meta)
            if cand.predicted is not None:
                meta["predicted"] = cand.predicted
            db.commit_record(Record.from_run(wl.key, fp, cand.trace_json, run, policy=runner.policy, meta=meta))
            ctx.measured.add(trace_hash(cand.trace_json))
            counts[run.kind] += 1
            measured_here += 1
            if ctx.trials_left is not None:
                ctx.trials_left -= 1
            done_cands.append(cand)
            results.append(run)
            bar.update(run, time.monotonic() - start)
        if done_cands:
            search.notify(ctx, done_cands, results)
            per_candidate_s = (time.monotonic() - round_start) / len(done_cands)


def _confirmed(runner: Any, wl: Workload, build: Any, run: RunResult, seed: int) -> RunResult:
    """A candidate that beats the best so far is measured once more and keeps the slower of the two
    medians: among hundreds of noisy measurements the fastest is partly luck (the winner's curse), and
    a second, independent measurement keeps a lucky one from becoming the tuned kernel."""
    again = runner.run(wl, build, seed=seed)
    if not again.ok:
        return again
    return again if (again.median or 0.0) > (run.median or 0.0) else run


def _check_seed(seed: int, n: int) -> int:
    """A new input seed for every check, reproducible from the tuning seed."""
    return (seed * 1_000_003 + n * 7919 + 1) % (2**32)


def _recorded_result(db: Database, workload_key: str, fp: str, trace_json: str) -> RunResult:
    h = trace_hash(trace_json)
    rec = next((r for r in db.records(workload_key, fp) if r.trace_hash == h), None)
    if rec is None:
        return RunResult("run_error", "recorded result not found")
    return RunResult(rec.kind, rec.message, tuple(rec.samples))


def _trace_of(record: Record) -> Any:
    from tilegraph.schedule import Trace

    return Trace.from_json(record.trace_json)


# ---------------------------------------------------------------------------- the final kernel
def _best_kernel(wl: Workload, tgt: Any, db: Database, builder: Any, runner: Any) -> tuple[Any, Record]:
    """The fastest recorded kernel that passes one more check here; earlier runs' records count."""
    fp = str(tgt.fingerprint)
    candidates = db.top_k(wl.key, fp, 5)
    if not candidates:
        counts = Counter(r.kind for r in db.records(wl.key, fp))
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing measured"
        raise TilegraphError(f"no candidate for {wl.op_name} passed its correctness check ({summary})")
    for rec in candidates:
        kernel = builder.kernel(wl, rec.trace_json, rec.meta)
        inputs = random_inputs(wl, seed=int(rec.created) % 9973 + 17)
        refs = runner.references(wl, inputs)
        outs = kernel(*inputs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        ok, _, message = compare_outputs(outs, refs, runner.policy.rtol, runner.policy.atol_scale)
        if ok:
            return kernel, rec
        log.warning("best record %s failed its re-check (%s); trying the next", rec.trace_hash, message)
    raise TilegraphError(f"no recorded kernel for {wl.op_name} passed its re-check on this machine")


# ---------------------------------------------------------------------------- progress display
class _Progress:
    """A rich progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self, enabled: bool, wl: Workload, trials: int | None, time_budget: float | None):
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
        self._task = self._bar.add_task(f"tuning {wl.op_name}", total=float(time_budget if self._by_time else trials),
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
