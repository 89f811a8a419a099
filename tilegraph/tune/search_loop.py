"""The search loop every tuning path runs (through TuneSession.tune_slice): propose -> skip
traces already recorded for this workload and target (resume) -> build the batch in worker
processes -> check and time each in the isolated runner (a candidate faster than the best so far
is measured twice and keeps the slower median; one far slower than the best is timed once,
measure.time_slow_candidate) -> commit each result in its own transaction ->
notify the strategy. Stops at the trial or time budget or when the strategy is done.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections import Counter
from typing import Any

from tilegraph.schedule.trace import trace_hash
from tilegraph.stages import recording, stage
from tilegraph.te.workload import Workload
from tilegraph.tune.database import Database, Record
from tilegraph.tune.measure import MeasureInput
from tilegraph.tune.pipeline_profile import PipelineProfile
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext

_EMPTY_ROUNDS_LIMIT = 3


class Silent:
    """A progress display that shows nothing."""

    def update(self, run: Any, elapsed_s: float) -> None:
        pass


def search_loop(search: SearchStrategy, ctx: TuneContext, builder: Any, runner: Any, db: Database,
                batch_size: int, counts: Counter[str], bar: Any, start: float,
                profile: PipelineProfile | None = None) -> None:
    """Propose, build, check, time and record until ctx's trial or time budget is spent or the
    strategy is done; traces in ctx.measured are never measured again (the strategy is told their
    recorded results). `counts` gains one per measurement by result kind; `bar.update` sees each;
    `profile` gains the loop's stages (tune/pipeline_profile.py)."""
    loop_start = time.monotonic()
    tally = {"built": 0, "runs": 0, "measured": 0}
    with recording() as seconds:
        try:
            _loop(search, ctx, builder, runner, db, batch_size, counts, bar, start, tally)
        finally:
            if profile is not None:
                profile.add(seconds, tally["measured"], tally["runs"], tally["built"], time.monotonic() - loop_start)


def _loop(search: SearchStrategy, ctx: TuneContext, builder: Any, runner: Any, db: Database,
          batch_size: int, counts: Counter[str], bar: Any, start: float, tally: dict[str, int]) -> None:
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
        with stage("propose"):
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
            with stage("notify"):
                search.notify(ctx, known, [_recorded_result(db, wl.key, fp, c.trace_json) for c in known])
        if not fresh:
            empty_rounds += 1
            if empty_rounds >= _EMPTY_ROUNDS_LIMIT:
                break
            continue
        empty_rounds = 0
        seeds = [_check_seed(ctx.seed, len(ctx.measured) + n_cand) for n_cand in range(len(fresh))]
        with stage("build"):
            builds, prepared = _build_and_prepare(builder, runner, wl, fresh, seeds)
        tally["built"] += len(fresh)
        done_cands: list[Candidate] = []
        results: list[RunResult] = []
        spread = _measured_on_slots(runner, wl, builds, prepared, seeds, _budget_timeout(
            ctx, measured_here, runner.policy.timeout_s), best_s)
        for n_cand, (cand, build) in enumerate(zip(fresh, builds)):
            if spread is None and out_of_budget():
                break  # (a batch measured on several runners is recorded whole: its time is spent)
            cap = _budget_timeout(ctx, measured_here, runner.policy.timeout_s)
            if spread is not None:
                run = spread[n_cand]
            elif prepared[n_cand] is not None and build.ok:
                run = runner.run_on(build, *prepared[n_cand], timeout_s=cap, best_s=best_s)
            else:
                run = runner.run(wl, build, seed=seeds[n_cand], timeout_s=cap, best_s=best_s)
            prepared[n_cand] = None  # freed as the batch goes
            tally["runs"] += build.ok
            if run.kind == "timeout" and cap is not None:  # the budget ended while it ran: no verdict on
                if spread is None:                           # the candidate, so nothing is recorded
                    break
                continue  # (the rest of a spread batch was measured: recorded)
            if run.ok and run.median is not None and best_s is not None and run.median < best_s:
                run = _confirmed(runner, wl, build, run, _check_seed(ctx.seed + 1, len(ctx.measured) + n_cand))
                tally["runs"] += 1
            if run.ok and run.median is not None and (best_s is None or run.median < best_s):
                best_s = run.median
            meta = dict(cand.meta)
            if run.node:
                meta["node"] = run.node
            if cand.predicted is not None:
                meta["predicted"] = cand.predicted
            with stage("commit"):
                db.commit_record(Record.from_run(wl.key, fp, cand.trace_json, run, policy=runner.policy, meta=meta))
            tally["measured"] += 1
            ctx.measured.add(trace_hash(cand.trace_json))
            counts[run.kind] += 1
            measured_here += 1
            if ctx.trials_left is not None:
                ctx.trials_left -= 1
            done_cands.append(cand)
            results.append(run)
            bar.update(run, time.monotonic() - start)
        if done_cands:
            with stage("notify"):
                search.notify(ctx, done_cands, results)
            per_candidate_s = (time.monotonic() - round_start) / len(done_cands)


def _measured_on_slots(runner: Any, wl: Workload, builds: list[Any], prepared: list[Any], seeds: list[int],
                       cap: float | None, best_s: float | None) -> list[RunResult] | None:
    """The batch measured at once on a runner with several slots (a cluster's runner actors,
    tune/cluster/runner.py), results in order; None for a runner with one slot (measured one by one)."""
    if getattr(runner, "slots", 1) <= 1 or not hasattr(runner, "run_batch"):
        return None
    items = []
    for n, build in enumerate(builds):
        if not build.ok:
            items.append((build, (), (), cap, best_s))
            continue
        inputs, references = prepared[n] if prepared[n] is not None else runner.prepare(wl, seeds[n])
        prepared[n] = None
        items.append((build, inputs, references, cap, best_s))
    with stage("run"):
        return runner.run_batch(items)


PREPARED_BYTES_MAX = 256 << 20  # inputs and references drawn ahead for one batch, at most


def _build_and_prepare(builder: Any, runner: Any, wl: Workload, fresh: list[Candidate],
                       seeds: list[int]) -> tuple[list[Any], list[Any]]:
    """The batch built, and meanwhile (the builders compile in their own processes; this one only
    waits) the inputs and float64 references of as many of its checks as the wait and
    PREPARED_BYTES_MAX allow, in order: [(inputs, references) or None] per candidate. A runner
    without `prepare` (an injected one) draws its own when it runs. The builds are driven from
    this thread, the drawing from a helper: worker processes must be started by a thread that
    lives as long as they do (they die with it: measure.die_with_parent)."""
    inputs = [MeasureInput(wl, c.trace_json, c.meta) for c in fresh]
    prepared: list[Any] = [None] * len(fresh)
    prepare = getattr(runner, "prepare", None)
    if prepare is None or not hasattr(runner, "run_on"):
        return builder.build(inputs), prepared
    stop = threading.Event()

    def draw() -> None:
        used = 0
        for n, seed in enumerate(seeds):
            if stop.is_set() or (n and used * (n + 1) / n > PREPARED_BYTES_MAX):
                return
            prepared[n] = prepare(wl, seed)
            used += sum(a.nbytes for part in prepared[n] for a in part)

    with cf.ThreadPoolExecutor(1) as pool:
        drawing = pool.submit(draw)
        try:
            builds = builder.build(inputs)
        finally:
            stop.set()
        drawing.result()
    return builds, prepared


BUDGET_TIMEOUT_FLOOR_S = 2.0  # the least a candidate measured near the end of a time budget may take


def _budget_timeout(ctx: TuneContext, measured_here: int, policy_timeout_s: float) -> float | None:
    """A lower timeout for a candidate when the time budget ends before the policy's would: a hanging
    candidate then costs the time left (at least BUDGET_TIMEOUT_FLOOR_S), not the whole policy
    timeout past the budget (`tilegraph tune --time 20` once took 44 s so). None: the policy's
    (no deadline, or the first candidate of the run, which the budget always measures)."""
    if ctx.deadline is None or measured_here == 0:
        return None
    left = max(BUDGET_TIMEOUT_FLOOR_S, ctx.deadline - time.monotonic())
    return left if left < policy_timeout_s else None


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
    rec = db.record(workload_key, fp, trace_json)
    if rec is None:
        return RunResult("run_error", "recorded result not found")
    return RunResult(rec.kind, rec.message, tuple(rec.samples))


__all__ = ["Silent", "search_loop"]
