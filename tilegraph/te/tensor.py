"""Tensors and the builders users write: placeholder, compute, reduce_axis, sum/max/min.

A Tensor is identified by its object identity (two placeholders named "A" are two tensors);
structural comparison of whole definitions goes through `Workload.key`.
"""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tilegraph import dtype as dt
from tilegraph.dtype import DType
from tilegraph.errors import shorten
from tilegraph.te.dims import split_shape
from tilegraph.te.expr import (
    COMBINERS,
    Expr,
    ExprLike,
    IterVar,
    Reduce,
    TensorRead,
    Var,
    const,
)


@dataclass(frozen=True)
class PlaceholderOp:
    """An input tensor: its values come from the caller."""


@dataclass(frozen=True)
class ComputeOp:
    """out[axes] = body, where body may be a Reduce over reduction axes."""

    axes: tuple[IterVar, ...]
    body: Expr
    tag: str = ""
    attrs: tuple[tuple[str, object], ...] = ()

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()


@dataclass(frozen=True, eq=False)
class Tensor:
    """`shape` is the storage shape; `bounds` (empty when every extent is static) gives, per
    dimension, the run-time extent of a bounded one (te/dims.py) or None."""

    shape: tuple[int, ...]
    dtype: DType
    name: str
    op: PlaceholderOp | ComputeOp = field(default_factory=PlaceholderOp)
    bounds: tuple[Expr | None, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def extents(self) -> tuple[int | Expr, ...]:
        """Per dimension, the run-time extent where it has one (te/dims.py), else the static one:
        what an op computing over this tensor passes on as its own extents."""
        if not self.bounds:
            return self.shape
        return tuple(s if b is None else b for s, b in zip(self.shape, self.bounds))

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        """Tensors read by this tensor's compute body, in first-use order."""
        if self.is_placeholder:
            return ()
        from tilegraph.te.visit import walk

        seen: dict[int, Tensor] = {}
        for e in walk(self.op.body):
            if isinstance(e, TensorRead) and id(e.tensor) not in seen:
                seen[id(e.tensor)] = e.tensor
        return tuple(seen.values())

    def __getitem__(self, indices: ExprLike | Sequence[ExprLike]) -> Expr:
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(idx) != self.ndim:
            raise IndexError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(idx)}")
        exprs = tuple(const(i) for i in idx)
        for e in exprs:
            if not e.dtype.is_int:
                raise TypeError(f"index into {self.name} must be an integer expression, got {e.dtype}")
        return TensorRead(self, exprs)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"


MAX_ELEMENTS = 2**62  # index arithmetic is 64-bit at most (the C printer widens past 2**31 - 1)


def _check_shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    """Extents are positive integers (2.5 or "4" are refused, not truncated or parsed)."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"{what}: shape must be a sequence of integers, got {type(shape).__name__}")
    try:
        out = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{what}: every extent must be an integer, got {shorten(tuple(shape))}") from None
    if any(s <= 0 for s in out):
        raise ValueError(f"{what}: every extent must be a positive integer, got {shorten(out)}")
    if math.prod(out) > MAX_ELEMENTS:
        raise ValueError(f"{what}: {shorten(out)} has more than 2**62 elements")
    return out


def placeholder(shape: Sequence[int | Expr], dtype: str | DType = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape and dtype; an extent may be a run-time dim (te/dims.py)."""
    storage, bounds = split_shape(shape, f"placeholder {name}")
    return Tensor(_check_shape(storage, f"placeholder {name}"), dt.as_dtype(dtype), name, bounds=bounds)


def reduce_axis(extent: int | Expr, name: str = "k") -> IterVar:
    """A reduction axis over [0, extent); `extent` may be a run-time dim (te/dims.py)."""
    storage, bounds = split_shape((extent,), f"reduce_axis {name}")
    (static,) = _check_shape(storage, f"reduce_axis {name}")
    return IterVar(Var(name), static, "reduce", bounds[0] if bounds else None)


def compute(
    shape: Sequence[int | Expr],
    fcompute: Callable[..., ExprLike],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, object] | None = None,
) -> Tensor:
    """out[i0, i1, ...] = fcompute(i0, i1, ...). Axis names come from fcompute's parameters. An
    extent may be a run-time dim (te/dims.py): the axis then runs over [0, dim) when called."""
    storage, bounds = split_shape(shape, f"compute {name}")
    shape = _check_shape(storage, f"compute {name}")
    params = list(inspect.signature(fcompute).parameters)
    if len(params) == len(shape) and all(not p.startswith("*") for p in params):
        names = params
    else:
        names = [f"i{d}" for d in range(len(shape))]
    axis_bounds = bounds or (None,) * len(shape)
    axes = tuple(IterVar(Var(n), s, "spatial", b) for n, s, b in zip(names, shape, axis_bounds))
    body = const(fcompute(*(a.var for a in axes)))
    if isinstance(body, Reduce):
        spatial = {a.var for a in axes}
        if any(r.var in spatial for r in body.axes):
            raise ValueError(f"compute {name}: a reduction axis has the same name as a spatial axis")
    _check_no_nested_reduce(body, name)
    attr_items = tuple(sorted((attrs or {}).items()))
    return Tensor(shape, body.dtype, name, ComputeOp(axes, body, tag, attr_items), bounds)


def _check_no_nested_reduce(body: Expr, name: str) -> None:
    from tilegraph.te.visit import walk

    inner = body.source if isinstance(body, Reduce) else body
    if any(isinstance(e, Reduce) for e in walk(inner)):
        raise ValueError(f"compute {name}: a reduction must be the whole body, not nested in it")


def _reduce(combiner: str, source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None,
            where: Expr | None) -> Reduce:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes or any(a.kind != "reduce" for a in axes):
        raise ValueError(f"{combiner}: axis must be one or more te.reduce_axis")
    src = const(source)
    init_e = None if init is None else const(init, src.dtype)
    assert combiner in COMBINERS
    return Reduce(combiner, src, axes, init_e, where)


def sum(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None,  # noqa: A001
        where: Expr | None = None) -> Reduce:
    """Sum of `source` over reduction axes; `init` replaces 0 as the start value."""
    return _reduce("sum", source, axis, init, where)


def prod(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None,
         where: Expr | None = None) -> Reduce:
    """Product of `source` over reduction axes; `init` replaces 1 as the start value."""
    return _reduce("prod", source, axis, init, where)


def max(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None,  # noqa: A001
        where: Expr | None = None) -> Reduce:
    return _reduce("max", source, axis, init, where)


def min(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None,  # noqa: A001
        where: Expr | None = None) -> Reduce:
    return _reduce("min", source, axis, init, where)
