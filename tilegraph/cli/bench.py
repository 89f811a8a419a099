"""`tilegraph bench`: time the best known kernel and peer libraries alternately, in one process.

    row = bench_workload(wl, db, ["numpy", "torch"], seconds=1.0)
    row["latency_s"], row["gflops"], row["ratio_numpy"]      # ratio = peer latency / ours

Contenders are timed in rounds (ours, numpy, torch, ours, ...) so drift and turbo affect all
alike; each latency is the median of the per-round medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from tilegraph.te.workload import Workload
from tilegraph.testing.data import require_memory
from tilegraph.testing.peers import PeerUnavailable, peer_function
from tilegraph.tune.apply import best_schedule
from tilegraph.tune.database import Database
from tilegraph.tune.measure import MeasurePolicy, random_inputs, time_runs

ROUNDS = 5


def bench_workload(wl: Workload, db: Database, peers: Sequence[str], seconds: float = 1.0,
                   num_threads: int | None = None) -> dict[str, Any]:
    from tilegraph.driver import build
    from tilegraph.target import Target

    require_memory(wl)  # before building: lowering a kernel of 10^9-sized loops alone takes a minute
    target = Target()
    sch = best_schedule(wl, target, db)
    kernel = build(sch if sch is not None else wl, target=target)
    inputs = random_inputs(wl, seed=0)
    first = kernel(*inputs, num_threads=num_threads)
    outs = tuple(first) if isinstance(first, (list, tuple)) else (first,)
    contenders: dict[str, Callable[[], Any]] = {
        "tilegraph": lambda: kernel(*inputs, out=outs, num_threads=num_threads),
    }
    notes = []
    if sch is None and db.top_k(wl.key, str(target.fingerprint), 1):
        notes.append("the database's records for this workload do not replay here; timed the default schedule")
    if num_threads is not None and "torch" in peers:
        try:
            import torch
        except ImportError:
            pass
        else:
            torch.set_num_threads(num_threads)  # same thread count for every contender
    for peer in peers:
        try:
            contenders[peer] = peer_function(peer, wl, inputs)
        except PeerUnavailable as e:
            notes.append(f"{peer} skipped: {e}")
    policy = MeasurePolicy(warmup=1, min_time_s=seconds / ROUNDS, min_repeats=3)
    per_round: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(ROUNDS):
        for name, fn in contenders.items():
            per_round[name].append(statistics.median(time_runs(fn, policy)))
    latency = {name: statistics.median(v) for name, v in per_round.items()}
    ours = latency["tilegraph"]
    row: dict[str, Any] = {
        "schedule": "tuned" if sch is not None else "default", "latency_s": ours,
        "gflops": wl.flops() / ours / 1e9, "notes": notes,
    }
    for peer in peers:
        if peer in latency:
            row[f"{peer}_latency_s"] = latency[peer]
            row[f"ratio_{peer}"] = latency[peer] / ours
    return row
