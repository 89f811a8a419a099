"""Run-time dims: extents known only when a kernel is called, each within a declared range.

    seq = te.dim("seq", 128)                       # 1 <= seq <= 128 at run time
    X = te.placeholder((seq, 768), name="X")       # stored as (128, 768); rows [0, seq) hold data
    Y = te.compute((seq, 768), lambda i, j: X[i, j] * 2)

A Dim is an int32 variable usable in any index expression (`j.le(i + past)`). A shape entry that
is a Dim, or a sum or product of Dims and non-negative integers, is a *bounded* extent: its
tensor is stored at the extent's upper bound (every Dim at its upper), and an axis over it runs
over [0, value) at run time. Storage never changes with the values, so one kernel serves the whole
range with the same strides, and no value of the dims can make it index outside its arrays (its
loops keep their static upper bounds; the bounds become guards, see loop/from_te.py).
Elements of a bounded tensor at or past its run-time extent are unspecified: no computation over
[0, value) reads them.

A workload that uses Dims gets one more input, last among its inputs: `DIMS_INPUT`, an int32
array holding the values in the order of `Workload.dims` (sorted by name). `dims_array` builds it.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tilegraph import dtype as dt
from tilegraph.hashing import hash_once
from tilegraph.te.arith import affine, rebuild
from tilegraph.te.expr import BinOp, BufferLoad, Cmp, Const, Expr, IterVar, Var
from tilegraph.te.visit import walk

DIMS_INPUT = "tg_dims"  # the name of the workload input holding the run-time values of its Dims


@hash_once
@dataclass(frozen=True)
class Dim(Var):
    """A run-time extent `name` in [lower, upper] (a loop-IR-free te variable: lowering reads it
    from the workload's DIMS_INPUT)."""

    lower: int = 1
    upper: int = 1


def dim(name: str, upper: int, lower: int = 1) -> Dim:
    """A run-time extent: any integer in [lower, upper] when the kernel is called."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a dim's name must be an identifier, got {name!r}")
    try:
        lo, hi = operator.index(lower), operator.index(upper)
    except TypeError:
        raise TypeError(f"dim {name}: lower and upper must be integers, got {lower!r} and {upper!r}") from None
    if not 1 <= lo <= hi:
        raise ValueError(f"dim {name}: the range must satisfy 1 <= lower <= upper, got [{lo}, {hi}]")
    if hi > 2**31 - 1:
        raise ValueError(f"dim {name}: upper bound {hi} does not fit in int32")
    return Dim(name, dt.int32, lo, hi)


def dims_of(e: Expr) -> set[Dim]:
    """The Dims `e` mentions."""
    return {x for x in walk(e) if isinstance(x, Dim)}


def upper_bound(extent: Expr) -> int:
    """The largest value of a bounded extent: a Dim, or Dims and non-negative integers combined
    by + and * (so it grows with every Dim, and every Dim at its upper gives the largest value)."""
    if isinstance(extent, Dim):
        return extent.upper
    if isinstance(extent, Const) and extent.dtype.is_int and extent.value >= 0:
        return int(extent.value)
    if isinstance(extent, BinOp) and extent.op in ("add", "mul"):
        a, b = upper_bound(extent.a), upper_bound(extent.b)
        return a + b if extent.op == "add" else a * b
    raise ValueError(f"a run-time extent must be a dim, or dims and non-negative integers combined by + and *; "
                     f"got {extent}")


def canonical(extent: Expr) -> Expr:
    """A sum of Dims and a non-negative integer in one order (Dims by name, then the integer;
    arith.affine collects it), so that equal sums compare equal (a concat of past then seq rows
    and a target read as seq + past); any other extent as it is."""
    terms, constant = affine(extent)
    if not terms or constant < 0 or not all(isinstance(a, Dim) and c > 0 for a, c in terms.items()):
        return extent
    ordered = dict(sorted(terms.items(), key=lambda t: (t[0].name, t[0].lower, t[0].upper)))
    return rebuild(ordered, constant, extent.dtype)


def value_of(extent: Expr, values: Mapping[str, int]) -> int:
    """A bounded extent's value for given dims (name -> value)."""
    if isinstance(extent, Dim):
        return int(values[extent.name])
    if isinstance(extent, Const):
        return int(extent.value)
    assert isinstance(extent, BinOp) and extent.op in ("add", "mul"), extent
    a, b = value_of(extent.a, values), value_of(extent.b, values)
    return a + b if extent.op == "add" else a * b


def reads_dims(e: Expr) -> bool:
    """Whether a loop-IR expression reads the run-time dims (a load of DIMS_INPUT)."""
    return any(isinstance(x, BufferLoad) and x.buffer.name == DIMS_INPUT for x in walk(e))


def dims_guards(predicate: Expr) -> list[Cmp]:
    """The conjuncts `e < N` of a block predicate whose bound N reads the run-time dims and whose
    index e reads no memory: the guards loop/from_te.py writes, as schedules carry them."""
    out: list[Cmp] = []
    stack = [predicate]
    while stack:
        c = stack.pop()
        if isinstance(c, BinOp) and c.op == "and":
            stack += [c.a, c.b]
        elif (isinstance(c, Cmp) and c.op == "lt" and reads_dims(c.b)
              and not any(isinstance(x, BufferLoad) for x in walk(c.a))):
            out.append(c)
    return out


def split_shape(shape: Sequence[object], what: str) -> tuple[tuple[object, ...], tuple[Expr | None, ...]]:
    """(storage shape, run-time extents): a bounded entry is stored at its upper bound and keeps
    its expression; an integer entry is passed on as it is (checked by the caller), with None."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        return shape, ()  # type: ignore[return-value]  (the caller's check names the problem)
    storage: list[object] = []
    bounds: list[Expr | None] = []
    for s in shape:
        if isinstance(s, IterVar):
            s = s.var
        if isinstance(s, Expr) and not isinstance(s, Const):
            if not dims_of(s):
                raise ValueError(f"{what}: the extent {s} is an expression of no dim")
            try:
                storage.append(upper_bound(s))
            except ValueError as e:
                raise ValueError(f"{what}: {e}") from None
            bounds.append(canonical(s))
        else:
            storage.append(s.value if isinstance(s, Const) else s)
            bounds.append(None)
    return tuple(storage), (tuple(bounds) if any(b is not None for b in bounds) else ())


def check_values(dims: Sequence[Dim], values: Mapping[str, int]) -> None:
    """Every dim given, an integer within its range, and nothing else: ValueError naming the first
    that is not."""
    names = {d.name for d in dims}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown dim(s) {unknown}; this kernel's dims are {sorted(names)}")
    for d in dims:
        if d.name not in values:
            raise ValueError(f"no value for dim {d.name!r} (range [{d.lower}, {d.upper}])")
        try:
            v = operator.index(values[d.name])
        except TypeError:
            raise TypeError(f"dim {d.name!r} must be an integer, got {values[d.name]!r}") from None
        if not d.lower <= v <= d.upper:
            raise ValueError(f"dim {d.name!r} = {v} is outside its range [{d.lower}, {d.upper}]")


def dims_array(dims: Sequence[Dim], values: Mapping[str, int] | None = None) -> np.ndarray:
    """The DIMS_INPUT array for `values` (name -> value, checked); every dim at its upper bound
    where `values` is None (what tuning measures: a bucket is tuned at its upper bound)."""
    if values is None:
        values = {d.name: d.upper for d in dims}
    check_values(dims, values)
    return np.array([int(values[d.name]) for d in dims], dtype=np.int32)


SMALLEST_BUCKET = 16  # the default buckets' first upper bound: a dim up to it is one bucket


def buckets(d: Dim, uppers: Sequence[int] | None = None, smallest: int = SMALLEST_BUCKET) -> tuple[tuple[int, int], ...]:
    """The ranges [lo, hi] a dim's range is cut into, each tuned at its hi: at the given `uppers`
    (ascending; the dim's upper is added last where missing), or at powers of two from `smallest`
    (1..16, 17..32, 33..64, ...; a finer bucket for 1 is worth giving where m = 1 runs often:
    decoding)."""
    if uppers is None:
        cuts, u = [], smallest
        while u < d.upper:
            if u >= d.lower:
                cuts.append(u)
            u *= 2
    else:
        cuts = [operator.index(u) for u in uppers]
        if sorted(set(cuts)) != cuts or any(not d.lower <= u <= d.upper for u in cuts):
            raise ValueError(f"bucket uppers of dim {d.name!r} must ascend strictly within [{d.lower}, {d.upper}], "
                             f"got {list(uppers)}")
    if not cuts or cuts[-1] != d.upper:
        cuts.append(d.upper)
    out, lo = [], d.lower
    for hi in cuts:
        out.append((lo, hi))
        lo = hi + 1
    return tuple(out)


__all__ = ["DIMS_INPUT", "Dim", "SMALLEST_BUCKET", "buckets", "check_values", "dim", "dims_array", "dims_guards",
           "dims_of", "reads_dims", "split_shape", "upper_bound", "value_of"]
