"""Data movement by index: one stage each (no arithmetic on values).

    concat(xs, axis)                 out = xs joined along axis
    strided_slice(x, begin, end, strides)     out[i..] = x[begin + i * stride ..] per axis (steps may be negative)
    take(x, indices, axis)           out[a.., j.., b..] = x[a.., indices[j..], b..]   (negative indices wrap)
    gather_elements(x, indices, axis)  out[i..] = x[i.. with axis replaced by indices[i..]]
    broadcast_to(x, shape)           numpy broadcasting to `shape`
    pad_constant(x, before, after, value)   constant padding (negative widths crop)

Index tensors are int32 or int64; an out-of-range index is the caller's error (as in numpy, but
unchecked at run time: the graph frontends only pass indices they produced or the model gives).
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph import te
from tilegraph.ops._common import check_tensor, normalize_axis, operator, same_extent, stage
from tilegraph.ops.elementwise import broadcast_read
from tilegraph.te.expr import Expr
from tilegraph.te.printer import expr_str
from tilegraph.te.tensor import Tensor


@operator("concat")
def concat(xs: Sequence[Tensor], axis: int = 0, name: str = "concat") -> Tensor:
    xs = list(xs)
    if not xs:
        raise ValueError("argument xs must hold at least one tensor")
    for n, x in enumerate(xs):
        check_tensor(x, f"xs[{n}]", xs[0].ndim)
        if x.dtype != xs[0].dtype:
            raise TypeError(f"argument xs mixes dtypes ({xs[0].dtype} and {x.dtype})")
    axis = normalize_axis(axis, xs[0].ndim)
    first = xs[0].extents
    for n, x in enumerate(xs):
        off_axis = [(a, b) for d, (a, b) in enumerate(zip(x.extents, first)) if d != axis]
        if not all(same_extent(a, b) for a, b in off_axis):
            raise ValueError(f"argument xs[{n}] has shape {x.shape}, which differs from {xs[0].shape} off axis {axis}")
    # where each part starts along the axis: integers, or expressions of run-time dims (a KV cache of
    # `past` rows, then `seq` new ones: the new rows start at past)
    starts: list[int | Expr] = [0]
    for x in xs:
        starts.append(x.extents[axis] if isinstance(starts[-1], int) and starts[-1] == 0
                      else starts[-1] + x.extents[axis])
    shape = (*first[:axis], starts[-1], *first[axis + 1:])

    def body(*idx: Expr) -> Expr:
        position = idx[axis]
        value: Expr = xs[-1][(*idx[:axis], position - starts[-2], *idx[axis + 1:])]
        for x, start in reversed(list(zip(xs[:-1], starts[:-2]))):
            local = (*idx[:axis], position - start, *idx[axis + 1:])
            value = te.select(position.lt(start + x.extents[axis]), x[local], value)
        return value

    return stage(shape, body, name=name)


def slice_extent(size: int, begin: int, end: int, step: int) -> tuple[int, int]:
    """(first index, count) of x[begin:end:step] on an axis of `size`, numpy's clamping rules."""
    first, stop, stride = slice(begin, end, step).indices(size)
    return first, len(range(first, stop, stride))


@operator("strided_slice")
def strided_slice(x: Tensor, begin: Sequence[int], end: Sequence[int], strides: Sequence[int] | None = None,
                  name: str = "strided_slice") -> Tensor:
    check_tensor(x, "x")
    steps = tuple(strides) if strides is not None else (1,) * x.ndim
    if not (len(begin) == len(end) == len(steps) == x.ndim):
        raise ValueError(f"arguments begin, end and strides need one entry per axis of x ({x.ndim})")
    if any(s == 0 for s in steps):
        raise ValueError("argument strides may not hold 0")
    firsts, counts = zip(*(slice_extent(n, b, e, s) for n, b, e, s in zip(x.shape, begin, end, steps)))
    extents = list(counts)
    for axis, extent in enumerate(x.extents):  # a run-time extent (te/dims.py) is taken whole or not at all
        if isinstance(extent, Expr):
            if (firsts[axis], counts[axis], steps[axis]) != (0, x.shape[axis], 1):
                raise ValueError(f"strided_slice takes an axis with a run-time extent whole: axis {axis} of x "
                                 f"({extent}) sliced {begin[axis]}:{end[axis]}:{steps[axis]}")
            extents[axis] = extent
    return stage(tuple(extents), lambda *i: x[tuple(f + v * s for f, v, s in zip(firsts, i, steps))], name=name)


def _index_value(index: Expr, extent: int) -> Expr:
    """An int32 index from an int32/int64 value; negative values count from the end. Values out of
    [-extent, extent) are clamped to the nearest end: a bad index (a token id past the vocabulary)
    gives a wrong row, never a read outside the tensor."""
    value = index if index.dtype.name == "int32" else te.cast("int32", te.max_(te.min_(index, extent), -extent - 1))
    wrapped = te.select(value.lt(0), value + extent, value)
    return te.max_(te.min_(wrapped, extent - 1), 0)


@operator("take")
def take(x: Tensor, indices: Tensor, axis: int = 0, name: str = "take") -> Tensor:
    check_tensor(x, "x")
    check_tensor(indices, "indices")
    if indices.dtype.name not in ("int32", "int64"):
        raise TypeError(f"argument indices must be int32 or int64, got {indices.dtype}")
    axis = normalize_axis(axis, x.ndim)
    if x.bounds and x.bounds[axis] is not None:
        raise ValueError(f"take indexes along a static axis only; axis {axis} of x has the run-time extent "
                         f"{x.bounds[axis]}")
    k = indices.ndim
    shape = (*x.extents[:axis], *indices.extents, *x.extents[axis + 1:])

    def body(*idx: Expr) -> Expr:
        position = _index_value(indices[idx[axis:axis + k]], x.shape[axis])
        return x[(*idx[:axis], position, *idx[axis + k:])]

    return stage(shape, body, name=name)


@operator("gather_elements")
def gather_elements(x: Tensor, indices: Tensor, axis: int = 0, name: str = "gather_elements") -> Tensor:
    check_tensor(x, "x")
    check_tensor(indices, "indices", x.ndim)
    if indices.dtype.name not in ("int32", "int64"):
        raise TypeError(f"argument indices must be int32 or int64, got {indices.dtype}")
    axis = normalize_axis(axis, x.ndim)

    def body(*idx: Expr) -> Expr:
        position = _index_value(indices[idx], x.shape[axis])
        return x[(*idx[:axis], position, *idx[axis + 1:])]

    return stage(indices.shape, body, name=name)


@operator("broadcast_to")
def broadcast_to(x: Tensor, shape: Sequence[int | Expr], name: str = "broadcast_to") -> Tensor:
    """numpy.broadcast_to; a run-time dim of `shape` (te/dims.py) is x's same dim, or stretches an extent 1."""
    check_tensor(x, "x")
    shape = tuple(s if isinstance(s, Expr) else int(s) for s in shape)
    lead = len(shape) - x.ndim
    if lead < 0 or any(not (isinstance(e, int) and e == 1) and not (type(e) is type(shape[lead + d])
                                                                    and e == shape[lead + d])
                       for d, e in enumerate(x.extents)):
        shown = [str(e) for e in x.extents]
        raise ValueError(f"argument x of extents {shown} does not broadcast to {[str(s) for s in shape]}")
    return stage(shape, lambda *i: broadcast_read(x, i), name=name)


@operator("pad_constant")
def pad_constant(x: Tensor, before: Sequence[int], after: Sequence[int], value: float = 0.0,
                 name: str = "pad_constant") -> Tensor:
    check_tensor(x, "x")
    if len(before) != x.ndim or len(after) != x.ndim:
        raise ValueError(f"arguments before and after need one entry per axis of x ({x.ndim})")
    if any((b or a) and e is not None for e, b, a in zip(x.bounds, before, after)):
        raise ValueError(f"{name}: an axis of run-time extent cannot be padded (x extents "
                         f"{[str(e) if isinstance(e, int) else expr_str(e) for e in x.extents]}, "
                         f"before {tuple(before)}, after {tuple(after)}); pad only its static axes")
    shape = tuple(e if not b and not a else n + b + a for n, e, b, a in zip(x.shape, x.extents, before, after))
    if any(isinstance(s, int) and s <= 0 for s in shape):
        raise ValueError(f"padding {tuple(before)}/{tuple(after)} leaves no elements of x {x.shape}")

    def body(*idx: Expr) -> Expr:
        source = tuple(i - b for i, b in zip(idx, before))
        inside = [s.ge(0) for s, b in zip(source, before) if b > 0]
        inside += [s.lt(n) for s, n, a in zip(source, x.shape, after) if a > 0]
        if not inside:
            return x[source]
        return te.select(te.all_of(*inside), x[source], te.const(value, x.dtype))

    return stage(shape, body, name=name)
