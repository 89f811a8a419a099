"""Tuning for a target whose kernels run here but cannot be timed (another CPU architecture under
an emulator): the strategy's model ranks, an emulator checks, nothing is timed or stored.

    result = tg.tune("GMM-1", tg.Target("cpu", arch="aarch64"), trials=4)   # on an x86 host with qemu
    result.timed            # False: result.latency_s is the model's prediction, not a measurement
    result.kernel(a, b)     # runs under qemu-aarch64

The strategy searches with the target's hardware model (the aarch64 core's registers, lanes, FMA
units and caches), and its candidates are checked in the model's order: each is cross-compiled,
run on fresh random inputs with poisoned outputs under the emulator, and compared with the
float64 reference. The best-ranked candidate that passes is returned. Times taken under an
emulator say nothing about the real core, so none are taken, and the database is left untouched:
a record there would claim a measurement. Copy the program to a real board to time it (the
emulated runner's protocol, runtime/emulated.py).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from tilegraph.errors import BuildError, ScheduleError, TilegraphError
from tilegraph.schedule.trace import trace_hash
from tilegraph.te.workload import Workload
from tilegraph.tune.database import MemoryDatabase
from tilegraph.tune.result import RunResult, TuneResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext

DEFAULT_CHECKS = 4  # candidates checked when no budget is given: each run under qemu takes seconds


def check_candidate(wl: Workload, session: Any, candidate: Candidate, seed: int) -> tuple[Any, RunResult]:
    """(kernel or None, verdict) of one candidate: built for the session's target, checked once
    by the session (outputs poisoned, compared with the float64 reference), never timed."""
    from tilegraph.driver import build
    from tilegraph.schedule import Schedule

    try:
        kernel = build(Schedule.replay(wl, candidate.trace_json), target=session.target)
    except (BuildError, ScheduleError) as e:
        return None, RunResult("build_error", str(e).splitlines()[0] if str(e) else type(e).__name__)
    verdict = session.check(wl, kernel, seed)
    return (kernel if verdict.ok else None), verdict


def tune_checked_only(wl: Workload, session: Any, search: SearchStrategy) -> TuneResult:
    """tg.tune for a target whose kernels cannot be timed here (see the module docstring), through
    the session that checks its kernels (TuneSession with `timed` False)."""
    opts = session.options
    start = time.monotonic()
    limit = opts.trials if opts.trials is not None else (None if opts.time_budget is not None else DEFAULT_CHECKS)
    deadline = None if opts.time_budget is None else start + opts.time_budget
    ctx = TuneContext(wl, session.target, opts.seed, MemoryDatabase(), set(), limit, deadline, opts.num_threads,
                      budget_given=opts.trials is not None or opts.time_budget is not None)
    counts: Counter[str] = Counter()
    passed: list[tuple[Candidate, Any]] = []
    for n, cand in enumerate(_ranked(search, ctx, opts.batch_size)):
        out_of_time = deadline is not None and time.monotonic() >= deadline and counts
        if (limit is not None and sum(counts.values()) >= limit) or out_of_time:
            break
        kernel, verdict = check_candidate(wl, session, cand, seed=opts.seed * 7919 + n + 1)
        counts[verdict.kind] += 1
        if kernel is not None:
            passed.append((cand, kernel))
        search.notify(ctx, [cand], [verdict])
    failures = {k: v for k, v in counts.items() if k != "ok"}
    if not passed:
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing proposed"
        raise TilegraphError(f"no candidate for {wl.op_name} passed its check under the emulator ({summary})")
    best, kernel = passed[0]  # the model's order: the first that passed is the best-ranked correct one
    predicted = best.predicted if best.predicted is not None else float("nan")
    from tilegraph.schedule import Trace

    return TuneResult(kernel, Trace.from_json(best.trace_json), predicted, wl.flops() / predicted / 1e9,
                      sum(counts.values()), sum(failures.values()), time.monotonic() - start, search.name, wl.key,
                      failures, timed=False)


def _ranked(search: SearchStrategy, ctx: TuneContext, batch: int) -> list[Candidate]:
    """Everything the strategy proposes, best predicted first (unpredicted ones keep their order, last)."""
    proposed: list[Candidate] = []
    seen: set[str] = set()
    empty = 0
    while not search.done() and empty < 3 and len(proposed) < 64:
        fresh = [c for c in search.propose(ctx, batch) if trace_hash(c.trace_json) not in seen]
        empty = 0 if fresh else empty + 1
        for c in fresh:
            seen.add(trace_hash(c.trace_json))
            proposed.append(c)
    order = sorted(range(len(proposed)), key=lambda i: (proposed[i].predicted is None, proposed[i].predicted or 0.0, i))
    return [proposed[i] for i in order]


__all__ = ["DEFAULT_CHECKS", "check_candidate", "tune_checked_only"]
