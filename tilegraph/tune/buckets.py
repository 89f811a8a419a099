"""tune_buckets: one kernel per bucket of a run-time dim, each tuned at its bucket's upper bound.

    seq = te.dim("seq", 512)
    ...                                                   # a workload over seq
    kernel = tg.tune_buckets(wl, "seq", time_budget=120)  # buckets 1..16, 17..32, ..., 257..512
    kernel = tg.tune_buckets(wl, "seq", uppers=[1, 64, 512], weights=[4, 1, 1], trials=96)
    kernel(x, w, dims_array(wl.dims, {"seq": 37}))        # the kernel of bucket [33, 64]

Each bucket is the workload measured with the dim at the bucket's upper bound (`Workload.at`: its
own key, so its records are its own), tuned in ascending order, each search seeded with the best
schedule of the bucket below (every bucket's kernels take the same arrays; a neighbour's schedule
replays where its tiles fit this bucket's loops, and is recorded as a failed build where not). A
time or trial budget is split over the buckets in proportion to `weights` (how often each is
expected; equal by default). The result is a runtime.BucketedKernel
whose `.results` are the buckets' TuneResults, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tilegraph.errors import WorkloadError
from tilegraph.runtime.buckets import BucketedKernel
from tilegraph.schedule import Trace
from tilegraph.te.dims import buckets
from tilegraph.te.workload import Workload
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.strategy import SearchStrategy, get_strategy
from tilegraph.tune.strategy.base import Candidate
from tilegraph.tune.strategy.seeded import SeededStrategy
from tilegraph.tune.tune import tune


def tune_buckets(workload: Workload, dim_name: str | None = None, uppers: Sequence[int] | None = None,
                 weights: Sequence[float] | None = None, target: Any = "cpu", db: Any = None,
                 **option_fields: Any) -> BucketedKernel:
    """Tune `workload` once per bucket of its run-time dim `dim_name` (the only one by default);
    `uppers` cut the range (te.dims.buckets: powers of two from 16 by default). Other keywords
    are tg.tune's (strategy=, time_budget=, trials=, ...)."""
    names = [d.name for d in workload.dims]
    if dim_name is None:
        if len(names) != 1:
            raise WorkloadError(f"name the dim to bucket: this workload has dims {names}")
        dim_name = names[0]
    if dim_name not in names:
        raise WorkloadError(f"{dim_name!r} is not a dim of this workload (its dims: {names})")
    dim = workload.dims[names.index(dim_name)]
    ranges = buckets(dim, uppers)
    shares = _shares(weights, len(ranges))
    opts = TuneOptions().updated(**option_fields)
    results = []
    best_below: Trace | None = None
    for (_, hi), share in zip(ranges, shares):
        fields = dict(option_fields)
        if opts.time_budget is not None:
            fields["time_budget"] = opts.time_budget * share
        if opts.trials is not None:
            fields["trials"] = max(1, round(opts.trials * share))
        inner = opts.strategy if isinstance(opts.strategy, SearchStrategy) else get_strategy(opts.strategy)
        bucket = workload.at({dim_name: hi})
        if best_below is not None:  # the bucket below's best schedule measured first (where it fits these loops)
            seed = replace(best_below, workload_key=bucket.key).to_json()
            fields["strategy"] = SeededStrategy([Candidate(seed, None, {"strategy": "neighbour bucket"})], inner)
        result = tune(bucket, target, db, **fields)
        results.append(result)
        best_below = result.trace
    kernel = BucketedKernel(workload.dims, dim_name, ranges, [r.kernel for r in results])
    kernel.results = tuple(results)
    return kernel


def _shares(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0 / count] * count
    values = [float(w) for w in weights]
    if len(values) != count or any(not w > 0 for w in values):
        raise ValueError(f"weights must be {count} positive numbers, one per bucket, got {list(weights)}")
    total = sum(values)
    return [w / total for w in values]


__all__ = ["tune_buckets"]
