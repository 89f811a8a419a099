"""Settling a task's best: its few fastest records timed again against each other, in alternating
rounds, before one becomes the kernel.

    retimed = retime_best(db, builder, runner, workload, fingerprint, k=3, rounds=3)

Each record was timed once, at its own moment, on a machine whose speed moves (a shared VM: the
same kernel 1.7x apart minutes later); the fastest of hundreds is partly luck. Measured on BERT-base
bf16 (Xeon with AMX): the FFN GEMM's best record, a 16 x 48 tile product, had 0.42 ms recorded with
a spread of 2x; timed alternately against the 32 x 32 one recorded at 0.47 ms it took 0.94 against
0.69, and the model carrying it ran 45 ms against 36. Here the k best are built again and each
round times each of them once (the order rotating between rounds); each record is replaced by one
whose samples are all of its rounds' (so its median is over the same stretch of time as the
others'), marked `meta["retimed"]`. Should the best then be a record not yet re-timed (a lucky one
just below the k), it and the others not yet re-timed among the k best get rounds of their own,
up to `k + EXTRA` records in all. A candidate whose check fails now is recorded as what it gave
(never the best again); one whose build or run times out keeps its record (that verdict is the
machine's, not the kernel's).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tilegraph.te.workload import Workload
from tilegraph.tune.database import Database, Record
from tilegraph.tune.measure import MeasureInput
from tilegraph.tune.result import RunResult

RETIME_TOP = 3
RETIME_ROUNDS = 3
SETTLE_SHARE = 0.1  # of a time budget, kept for settling (tg.tune, the task scheduler)
EXTRA = 2  # records settled beyond the first k, when an un-settled one is still the best
WRONG_NOW = ("wrong_answer", "crash", "run_error")  # verdicts on the kernel (a timeout is the machine's)

log = logging.getLogger("tilegraph.tune")


def round_seconds(runner: Any, k: int = RETIME_TOP) -> float:
    """A guess, not a measurement, of one round of k runs: each run's min_time_s of timing, 30% more
    for warm-up and batching, and 50 ms for its inputs, reference and check."""
    return k * (1.3 * runner.policy.min_time_s + 0.05)


def round_fits(runner: Any, deadline: float | None, k: int = RETIME_TOP) -> bool:
    """Whether a round may start: at least half of it before `deadline` (a round, once started, is
    finished: the comparison needs every candidate in it; half a round is about 0.2% of a 240-s budget)."""
    return deadline is None or time.monotonic() + 0.5 * round_seconds(runner, k) <= deadline


def retime_best(db: Database, builder: Any, runner: Any, workload: Workload, fingerprint: str,
                k: int = RETIME_TOP, rounds: int = RETIME_ROUNDS, seed: int = 0,
                deadline: float | None = None) -> list[Record]:
    """The records re-timed (best first after settling); nothing when fewer than two are ok. A round
    starts only while half of it fits before `deadline` (time.monotonic()), and once started it is
    finished."""
    settled: dict[str, Record] = {}
    while len(settled) < k + EXTRA and round_fits(runner, deadline, k):
        top = db.top_k(workload.key, fingerprint, k)
        if len(top) < 2 or top[0].trace_hash in settled:
            break
        todo = [r for r in top if r.trace_hash not in settled][: k + EXTRA - len(settled)]
        if not todo:
            break
        for record in _alternated(db, builder, runner, workload, fingerprint, todo, rounds, seed, deadline):
            settled[record.trace_hash] = record
    return sorted(settled.values(), key=lambda r: (r.latency_s if r.ok and r.latency_s is not None else float("inf")))


def _alternated(db: Database, builder: Any, runner: Any, workload: Workload, fingerprint: str,
                records: Sequence[Record], rounds: int, seed: int, deadline: float | None) -> list[Record]:
    builds = builder.build([MeasureInput(workload, r.trace_json, r.meta) for r in records])
    samples: list[list[float]] = [[] for _ in records]
    failed: list[RunResult | None] = [None] * len(records)
    done = 0
    for n in range(rounds):
        if done and not round_fits(runner, deadline, len(records)):
            break
        for i in [(j + n) % len(records) for j in range(len(records))]:
            if failed[i] is not None:
                continue
            run = runner.run(workload, builds[i], seed=seed * 7919 + n * 131 + i)
            if run.ok:
                samples[i].extend(run.samples)
            else:
                failed[i] = run
        done += 1
    out = []
    for record, got, failure in zip(records, samples, failed):
        if failure is not None and failure.kind not in WRONG_NOW:  # a build or run that timed out: no verdict
            out.append(record)
            continue
        if failure is not None:  # it passed when recorded and fails now: what it gave now is the record
            log.warning("re-timing %s of %s: %s (%s)", record.trace_hash, workload.op_name, failure.kind,
                        failure.message[:200])
            new = Record.from_run(workload.key, fingerprint, record.trace_json, failure, policy=runner.policy,
                                  meta={**record.meta, "retimed": done})
        else:
            new = Record.from_run(workload.key, fingerprint, record.trace_json, RunResult("ok", samples=tuple(got)),
                                  policy=runner.policy, meta={**record.meta, "retimed": done,
                                                              "recorded_s": record.latency_s})
        new = replace(new, created=record.created)
        db.replace_record(new)
        out.append(new)
    return out


__all__ = ["RETIME_ROUNDS", "RETIME_TOP", "SETTLE_SHARE", "retime_best", "round_fits", "round_seconds"]
