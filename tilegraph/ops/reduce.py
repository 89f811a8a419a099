"""Reductions over axes: sum, mean, max, min (numpy semantics for `axis` and `keepdims`).

    sum(x, axis=(1,))   out[i, j] = sum_r x[i, r, j]                     (keepdims: out[i, 0, j])
    mean                a sum stage, then out = sum / (product of reduced extents)

Reducing every axis without keepdims gives shape (1,) rather than a 0-d tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph import te
from tilegraph.ops._common import check_tensor, normalize_axes, operator, stage
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor

Axes = int | Sequence[int] | None


def reduced_shape(shape: tuple[int | Expr, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int | Expr, ...]:
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes) or (1,)


def _reduce(x: Tensor, axis: Axes, keepdims: bool, combiner: str, name: str) -> Tensor:
    check_tensor(x, "x")
    axes = normalize_axes(axis, x.ndim)
    out_shape = reduced_shape(x.extents, axes, keepdims)
    kept = [d for d in range(x.ndim) if d not in axes]
    reduce_vars = {a: te.reduce_axis(x.extents[a], f"r{a}") for a in axes}
    builder = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}[combiner]

    def body(*idx: Expr) -> Expr:
        if keepdims:
            read = tuple(reduce_vars[d] if d in axes else idx[d] for d in range(x.ndim))
        else:
            out_of = dict(zip(kept, idx))
            read = tuple(reduce_vars[d] if d in axes else out_of[d] for d in range(x.ndim))
        return builder(x[read], axis=tuple(reduce_vars.values()))

    return stage(out_shape, body, name=name)


@operator("sum")
def sum(x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "sum") -> Tensor:
    return _reduce(x, axis, keepdims, "sum", name)


@operator("max")
def max(x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "max") -> Tensor:
    return _reduce(x, axis, keepdims, "max", name)


@operator("prod")
def prod(x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "prod") -> Tensor:
    return _reduce(x, axis, keepdims, "prod", name)


@operator("min")
def min(x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "min") -> Tensor:
    return _reduce(x, axis, keepdims, "min", name)


@operator("mean")
def mean(x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "mean") -> Tensor:
    check_tensor(x, "x")
    if not x.dtype.is_float:
        raise TypeError(f"argument x must have a floating-point dtype for mean, got {x.dtype}")
    axes = normalize_axes(axis, x.ndim)
    static = 1
    run_time: list[Expr] = []  # the reduced run-time extents: the divisor is known only when called
    for a in axes:
        extent = x.extents[a]
        if isinstance(extent, int):
            static *= extent
        else:
            run_time.append(extent)
    total = _reduce(x, axis, keepdims, "sum", f"{name}_sum")
    if not run_time:
        return stage(total.extents, lambda *i: total[i] * (1.0 / static), name=name)
    count: Expr = te.const(static)
    for extent in run_time:
        count = count * extent
    return stage(total.extents, lambda *i: total[i] / te.cast(x.dtype, count), name=name)
