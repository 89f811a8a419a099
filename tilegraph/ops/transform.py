"""Data movement: reshape and transpose (one copy stage each).

    transpose(x, axes)   out[i0, .., ik] = x[i_{p^-1(0)}, ..]      out.shape[d] = x.shape[axes[d]]
    reshape(x, shape)    out[idx] = x[unravel(ravel(idx, out.shape), x.shape)]   (row-major; one -1 allowed)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tilegraph.ops._common import check_tensor, operator, stage
from tilegraph.te.dims import canonical
from tilegraph.te.expr import Const, Expr
from tilegraph.te.tensor import Tensor


@operator("transpose")
def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str = "transpose") -> Tensor:
    """Permute dimensions; axes=None reverses them (numpy's default)."""
    check_tensor(x, "x")
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(axes)
    if sorted(a % x.ndim if isinstance(a, int) and -x.ndim <= a < x.ndim else -1 for a in perm) != list(range(x.ndim)):
        raise ValueError(f"argument axes must be a permutation of 0..{x.ndim - 1}, got {axes!r}")
    perm = tuple(a % x.ndim for a in perm)
    out_shape = tuple(x.extents[a] for a in perm)

    def body(*idx: Expr) -> Expr:
        read: list[Expr] = [idx[0]] * x.ndim
        for out_dim, in_dim in enumerate(perm):
            read[in_dim] = idx[out_dim]
        return x[tuple(read)]

    return stage(out_shape, body, name=name)


def _resolve_shape(newshape: Sequence[int], size: int, old: tuple[int, ...]) -> tuple[int, ...]:
    items = tuple(newshape)
    if not items or not all(isinstance(s, int) and not isinstance(s, bool) for s in items):
        raise ValueError(f"argument newshape must be a non-empty sequence of ints, got {newshape!r}")
    if items.count(-1) > 1 or any(s < -1 or s == 0 for s in items):
        raise ValueError(f"argument newshape may hold positive extents and one -1, got {newshape!r}")
    known = 1
    for s in items:
        if s != -1:
            known *= s
    if -1 in items:
        if size % known:
            raise ValueError(f"argument newshape {items} cannot hold the {size} elements of shape {old}")
        items = tuple(size // known if s == -1 else s for s in items)
    total = 1
    for s in items:
        total *= s
    if total != size:
        raise ValueError(f"argument newshape {items} has {total} elements; x of shape {old} has {size}")
    return items


def _segments(extents: Sequence[int | Expr]) -> tuple[list[tuple[int, ...]], list[Expr]]:
    """The static runs of a shape between its run-time extents, and those extents in order:
    (a, n, b, c) -> ([(a,), (b, c)], [n])."""
    runs: list[list[int]] = [[]]
    dims: list[Expr] = []
    for e in extents:
        if isinstance(e, int):
            runs[-1].append(e)
        else:
            dims.append(e)
            runs.append([])
    return [tuple(r) for r in runs], dims


def _reshape_around_dims(x: Tensor, newshape: Sequence[int | Expr], name: str) -> Tensor:
    """A reshape that keeps each run-time extent a whole axis, in order, and reshapes the static
    runs between them (their products must agree): with storage at the upper bounds, the element
    at run-time index s stays at s, so a row of a sequence is still the same row."""
    old_runs, old_dims = _segments(x.extents)
    new_extents = tuple(canonical(e) if isinstance(e, Expr) and not isinstance(e, Const) else e for e in newshape)
    new_runs, new_dims = _segments(new_extents)
    if len(old_dims) != len(new_dims) or any(type(a) is not type(b) or a != b for a, b in zip(old_dims, new_dims)):
        raise ValueError(f"reshape keeps run-time extents whole and in order: x has {[str(e) for e in x.extents]}, "
                         f"newshape {[str(e) for e in new_extents]}")
    for old, new in zip(old_runs, new_runs):
        if any(not isinstance(e, int) or isinstance(e, bool) or e <= 0 for e in new):
            raise ValueError(f"argument newshape must hold positive extents around its run-time ones, got {newshape!r}")
        if math.prod(old) != math.prod(new):
            raise ValueError(f"reshape keeps run-time extents whole and in order, reshaping only the static "
                             f"extents between them: {old} cannot become {new} (x {[str(e) for e in x.extents]}, "
                             f"newshape {[str(e) for e in new_extents]})")

    def body(*idx: Expr) -> Expr:
        read: list[Expr] = []
        pos = 0
        for run_index, (old, new) in enumerate(zip(old_runs, new_runs)):
            flat: Expr | int = 0
            for i, extent in zip(idx[pos:pos + len(new)], new):
                flat = i if isinstance(flat, int) else flat * extent + i
            pos += len(new)
            stride = math.prod(old)
            for d, extent in enumerate(old):
                stride //= extent
                part = flat // stride if stride != 1 else flat
                read.append(part % extent if d > 0 else part)
            if run_index < len(old_dims):
                read.append(idx[pos])
                pos += 1
        return x[tuple(read)]

    return stage(new_extents, body, name=name)


@operator("reshape")
def reshape(x: Tensor, newshape: Sequence[int | Expr], name: str = "reshape") -> Tensor:
    """Row-major reshape, as numpy.reshape. With run-time dims (te/dims.py), each stays a whole
    axis in order (`(n, 768) -> (n, 12, 64)`), the static extents between them reshaped."""
    check_tensor(x, "x")
    if x.bounds or any(isinstance(e, Expr) for e in newshape):
        return _reshape_around_dims(x, newshape, name)
    size = 1
    for s in x.shape:
        size *= s
    out_shape = _resolve_shape(newshape, size, x.shape)

    def body(*idx: Expr) -> Expr:
        flat: Expr | int = 0
        for i, extent in zip(idx, out_shape):
            flat = i if isinstance(flat, int) else flat * extent + i
        read = []
        stride = size
        for d, extent in enumerate(x.shape):
            stride //= extent
            part = flat // stride if stride != 1 else flat
            read.append(part % extent if d > 0 else part)
        return x[tuple(read)]

    return stage(out_shape, body, name=name)
