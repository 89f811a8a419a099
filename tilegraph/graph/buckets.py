"""Tuned buckets of a model's run-time dim: one kernel per bucket for every kernel over it, the
call dispatched in native code by the dim's value.

    plan = bucket_plan(graph, None)          # the widest dim, powers of two from 16: 1..16, ..., 257..512
    plan = bucket_plan(graph, {"seq": [16, 64, 128]})   # ..16, 17..64, 65..128, 129..upper
    plan = bucket_plan(graph, None, {"seq": [32]})       # tuning weighed to the bucket of 32 (plan.shares)
    tasks = extract_tasks(graph, groups, plan)          # a task per (anchor, bucket), seeded by neighbours
    built = bucket_kernels(specs, built, plan, target, records)   # kernels over the dim: BucketedKernels

A bucket of a kernel is the same computation with its loops sized to the bucket's upper bound
(`Workload.at`): its own key, its own tuning records (each bucket's task is tuned at its upper
bound, seeded with the best schedule of the bucket above it), the same arrays as every bucket's.
Only measured buckets get kernels of their own: without records (its default and at least one
other, measured against each other), a bucket runs the kernel of the bucket above (Gensor's
unmeasured pick at a bucket's size was slower than the whole range's kernel at that size:
BERT-base at 64 tokens, 66 ms against 60).
The model's step calls the BucketedKernel like any kernel (runtime/buckets.py): a length never
seen runs its bucket's kernels, never a recompilation. The top bucket is the kernel over the whole
range, built already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilegraph.errors import GraphError
from tilegraph.graph.dims import te_dims
from tilegraph.runtime.buckets import BucketedKernel
from tilegraph.te.dims import buckets

# Of the tuning shares, this much is spread over every bucket evenly when expected values are
# given, so a bucket none of them falls in keeps a weight: the task scheduler's slices after its
# first round go by weight x gain, and a weight of 0 would leave such a bucket one slice at most.
UNEXPECTED_SHARE = 0.1


@dataclass(frozen=True)
class BucketPlan:
    dim: str
    ranges: tuple[tuple[int, int], ...]
    # how much of the model's calls each bucket is expected to take (the tuner's weights); equal
    # shares unless the dim's expected values were given (`bucket_plan`)
    shares: tuple[float, ...] = ()

    def share(self, index: int) -> float:
        return self.shares[index] if self.shares else 1.0 / len(self.ranges)

    @property
    def uppers(self) -> tuple[int, ...]:
        return tuple(hi for _, hi in self.ranges)

    def describe(self) -> str:
        return f"{self.dim} in {', '.join(f'[{lo}, {hi}]' for lo, hi in self.ranges)}"


def bucket_plan(graph: Any, option: Any, expected: Any = None) -> BucketPlan | None:
    """The buckets a model's kernels are built in: None for a model without dims or with
    `option` False; the dim `option` names ({dim: uppers}, uppers None for powers of two from 16),
    else the dim with the widest range. `expected` ({dim: values}, a value repeated as often as it
    is expected) weighs the buckets' tuning by the values falling in each (`expected_shares`)."""
    dims = te_dims(graph) if graph.dims else {}
    expected_values = _expected(expected, dims)
    if not graph.dims or option is False:
        return None
    if option is None or option is True:
        name = max(sorted(dims), key=lambda n: dims[n].upper / dims[n].lower)
        uppers = None
    else:
        if not isinstance(option, Mapping) or len(option) != 1:
            raise GraphError(f"buckets takes {{dim: uppers}} for one dim of the model ({', '.join(dims)}), "
                             f"True/None for the default or False for none; got {option!r}")
        (name, uppers), = option.items()
        if name not in dims:
            raise GraphError(f"buckets names dim {name!r}; the model's dims are {', '.join(dims)}")
    try:
        ranges = buckets(dims[name], None if uppers is None else list(uppers))
    except (TypeError, ValueError) as err:
        raise GraphError(f"buckets of dim {name}: {err}") from None
    if len(ranges) <= 1:
        return None
    if expected_values is None:
        return BucketPlan(name, ranges)
    if expected_values[0] != name:
        raise GraphError(f"expected gives values of dim {expected_values[0]}; the buckets are over dim {name}")
    return BucketPlan(name, ranges, expected_shares(ranges, expected_values[1]))


def expected_shares(ranges: Sequence[tuple[int, int]], values: Sequence[int]) -> tuple[float, ...]:
    """Each bucket's share of the calls: the fraction of `values` within it, with UNEXPECTED_SHARE
    of the whole spread evenly. Prompts of 32 tokens over buckets 1..16, 17..32, 33..64, 65..95:
    0.025, 0.925, 0.025, 0.025."""
    counts = [sum(lo <= v <= hi for v in values) for lo, hi in ranges]
    return tuple((1 - UNEXPECTED_SHARE) * c / len(values) + UNEXPECTED_SHARE / len(ranges) for c in counts)


def _expected(expected: Any, dims: Mapping[str, Any]) -> tuple[str, tuple[int, ...]] | None:
    """(dim, values) of `expected`, each value checked within the dim's range; None for None."""
    if expected is None:
        return None
    if not isinstance(expected, Mapping) or len(expected) != 1:
        raise GraphError(f"expected takes {{dim: values}} for one dim of the model; got {expected!r}")
    (name, values), = expected.items()
    if not dims:
        raise GraphError(f"expected names dim {name!r}, but the model has no run-time dims; keep the "
                         f"extent a dim with dims={{{name!r}: (lower, upper)}} (--dim on the CLI)")
    if name not in dims:
        raise GraphError(f"expected names dim {name!r}; the model's dims are {', '.join(dims)}")
    values = [values] if isinstance(values, int) else values
    if (not isinstance(values, Sequence) or isinstance(values, str) or not values
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)):
        raise GraphError(f"expected values of dim {name} must be a non-empty list of integers, got {values!r}")
    lower, upper = dims[name].lower, dims[name].upper
    outside = [v for v in values if not lower <= v <= upper]
    if outside:
        raise GraphError(f"expected value(s) {outside[:3]} of dim {name} outside its range [{lower}, {upper}]")
    return name, tuple(values)


def bucket_specs(spec: Any, plan: BucketPlan) -> list[Any]:
    """`spec` (a KernelSpec or FusedSpec) once per bucket, the top bucket `spec` itself; [spec]
    where its computation does not run over the plan's dim."""
    if plan.dim not in [d.name for d in spec.workload.dims]:
        return [spec]
    return [spec.at({plan.dim: hi}) for hi in plan.uppers[:-1]] + [spec]


def bucket_kernels(specs: Sequence[Any], built: dict[str, Any], plan: BucketPlan, target: Any, db: Any,
                   workers: int | None, progress: Any = None) -> dict[str, Any]:
    """`built` with each kernel over the plan's dim a BucketedKernel of its buckets' kernels: the
    lower buckets with a tuning record of their own (in `db`) built here from it; a bucket
    without one, or that fails to build, runs the next one up's kernel (it covers its values too,
    and was measured: an unmeasured pick for a bucket is no better a bet). A kernel whose buckets
    all fall back stays the one kernel it was."""
    from tilegraph.graph.kernels import BuiltKernel, build_kernels

    per_spec = {spec.key: bucket_specs(spec, plan) for spec in specs if spec.key in built}
    lower = [b for parts in per_spec.values() for b in parts[:-1] if _measured(b, db, target)]
    errors: dict[str, Any] = {}
    extra = build_kernels(lower, target, db, workers, progress, errors=errors) if lower else {}
    out = dict(built)
    for key, parts in per_spec.items():
        if len(parts) == 1:
            continue
        kernels = [extra[b.key].kernel if b.key in extra else None for b in parts[:-1]] + [built[key].kernel]
        for i in range(len(kernels) - 2, -1, -1):
            if kernels[i] is None:
                kernels[i] = kernels[i + 1]
        if all(k is kernels[-1] for k in kernels):
            continue
        dims = parts[-1].workload.dims
        out[key] = BuiltKernel(BucketedKernel(dims, plan.dim, plan.ranges, kernels), built[key].tuned)
    return out


def _measured(spec: Any, db: Any, target: Any) -> bool:
    """Whether the bucket's schedule was chosen by measuring: its (anchor's) records hold at least two
    ok ones, its default and another (a bucket's first slice measures the bucket above's best right
    after its default). A bucket holding its default alone (its slice cut short by the deadline) is
    no measured choice: GPT-2's c_attn at 16 tokens ran 4.1 ms in the bucket's default schedule,
    0.45 ms in the tuned kernel of the bucket above."""
    if db is None or not hasattr(db, "top_k"):
        return False
    anchor = getattr(spec, "anchor", None)
    workload = anchor.workload if anchor is not None else spec.workload
    try:
        return len(db.top_k(workload.key, str(target.fingerprint), 2)) >= 2
    except Exception:  # noqa: BLE001 (an unreadable database builds no bucket of its own, as none)
        return False


__all__ = ["BucketPlan", "bucket_plan", "bucket_specs", "bucket_kernels"]
