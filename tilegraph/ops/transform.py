"""Data movement: reshape and transpose (one copy stage each).

    transpose(x, axes)   out[i0, .., ik] = x[i_{p^-1(0)}, ..]      out.shape[d] = x.shape[axes[d]]
    reshape(x, shape)    out[idx] = x[unravel(ravel(idx, out.shape), x.shape)]   (row-major; one -1 allowed)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tilegraph.ops._common import check_tensor, operator, stage
from tilegraph.te.dims import canonical, dims_of, upper_bound, value_of
from tilegraph.te.expr import Const, Expr
from tilegraph.te.printer import expr_str
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


def _sizes_agree(a: Sequence[int | Expr], b: Sequence[int | Expr]) -> bool:
    """Whether two lists of extents hold as many elements at every value of their dims (checked at
    the upper bounds, the lower bounds and each dim alone at its lower bound: products of dims
    agree at all of them only when they are the same product)."""
    dims = sorted({d for e in (*a, *b) if isinstance(e, Expr) for d in dims_of(e)}, key=lambda d: d.name)
    points = [{d.name: d.upper for d in dims}, {d.name: d.lower for d in dims}]
    points += [{**points[0], d.name: d.lower} for d in dims]
    return all(math.prod(e if isinstance(e, int) else value_of(e, p) for e in a)
               == math.prod(e if isinstance(e, int) else value_of(e, p) for e in b) for p in points)


def _shown(extent: int | Expr) -> str:
    return str(extent) if isinstance(extent, int) else expr_str(extent)


def _storage_groups(old: Sequence[int], new: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """The axes of two storage shapes of as many elements in groups of equal size, smallest first
    ((8, 40, 768) and (320, 768): [([0, 1], [0]), ([2], [1])]); axes of storage 1 join the group
    before them (or the first)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        ga, gb, pa, pb = [], [], 1, 1
        while True:
            if (pa == 1 or pa < pb) and i < len(old):
                pa *= old[i]
                ga.append(i)
                i += 1
            elif (pb == 1 or pb < pa) and j < len(new):
                pb *= new[j]
                gb.append(j)
                j += 1
            else:
                break
            if pa == pb and pa != 1:
                while i < len(old) and old[i] == 1:
                    ga.append(i)
                    i += 1
                while j < len(new) and new[j] == 1:
                    gb.append(j)
                    j += 1
                break
        if groups and (pa == 1 or pb == 1):
            groups[-1][0].extend(ga)
            groups[-1][1].extend(gb)
        else:
            groups.append((ga, gb))
    return groups


def reshape_keeps_storage(x_extents: Sequence[int | Expr], x_shape: Sequence[int],
                          out_extents: Sequence[int | Expr], out_shape: Sequence[int]) -> bool:
    """Whether reshape `out` of `x` leaves every element where x's storage holds it (a view): in
    each group of axes of equal storage only the first axis on either side may be a run-time
    extent ((seq, 768) -> (seq, 12, 64), (batch, 12, seq, 64) -> (12*batch, seq, 64)). Merging
    (batch, seq) into batch*seq rows moves elements: row b*seq + s is stored at b*S + s."""
    if all(isinstance(e, int) for e in (*x_extents, *out_extents)):
        return True
    for ga, gb in _storage_groups(tuple(x_shape), tuple(out_shape)):
        if not _sizes_agree([x_extents[a] for a in ga], [out_extents[b] for b in gb]):
            return False
        # axes stored once hold index 0 only: (1, seq, 768) -> (seq, 768) keeps storage
        wide_a, wide_b = [a for a in ga if x_shape[a] != 1], [b for b in gb if out_shape[b] != 1]
        if any(not isinstance(x_extents[a], int) for a in wide_a[1:]) or any(
                not isinstance(out_extents[b], int) for b in wide_b[1:]):
            return False
    return True


def _reshape_extents(x: Tensor, newshape: Sequence[int | Expr], name: str) -> Tensor:
    """A row-major reshape over run-time extents (te/dims.py), as numpy.reshape of the elements the
    extents hold: each group of axes of equal storage (`_storage_groups`) is reshaped on its own,
    so where a group keeps its run-time extent first the indices are static arithmetic (and the
    graph keeps the reshape a view: reshape_keeps_storage); a group merging two run-time extents
    reads through a division by them (rows of batch x seq packed together)."""
    new_extents = tuple(canonical(e) if isinstance(e, Expr) and not isinstance(e, Const) else e for e in newshape)
    if any(isinstance(e, int) and (isinstance(e, bool) or e <= 0) for e in new_extents):
        raise ValueError(f"argument newshape must hold positive extents around its run-time ones, got {newshape!r}")
    if not _sizes_agree(x.extents, new_extents):
        raise ValueError(f"reshape of x with extents {[_shown(e) for e in x.extents]} to "
                         f"{[_shown(e) for e in new_extents]}: not as many elements at every value of the dims")
    # as many elements at the upper bounds (checked above): stored in as many
    new_storage = tuple(e if isinstance(e, int) else upper_bound(e) for e in new_extents)
    groups = _storage_groups(x.shape, new_storage)
    if not all(_sizes_agree([x.extents[a] for a in ga], [new_extents[b] for b in gb]) for ga, gb in groups):
        groups = [(list(range(x.ndim)), list(range(len(new_extents))))]

    def body(*idx: Expr) -> Expr:
        read: list[Expr] = [idx[0]] * x.ndim
        for ga, gb in groups:
            if len(ga) == 1 and len(gb) == 1:
                read[ga[0]] = idx[gb[0]]
                continue
            flat: Expr | int = 0
            for b in gb:
                flat = idx[b] if isinstance(flat, int) else flat * new_extents[b] + idx[b]
            for k, a in enumerate(ga):
                stride: Expr | int = 1
                for later in ga[k + 1:]:
                    stride = stride * x.extents[later]
                part = flat // stride if not (isinstance(stride, int) and stride == 1) else flat
                read[a] = part % x.extents[a] if k > 0 else part
        return x[tuple(read)]

    return stage(new_extents, body, name=name)


@operator("reshape")
def reshape(x: Tensor, newshape: Sequence[int | Expr], name: str = "reshape") -> Tensor:
    """Row-major reshape, as numpy.reshape. With run-time dims (te/dims.py), of the elements the
    extents hold: `(n, 768) -> (n, 12, 64)`, `(batch, seq, 768) -> (batch*seq, 768)`."""
    check_tensor(x, "x")
    if x.bounds or any(isinstance(e, Expr) for e in newshape):
        return _reshape_extents(x, newshape, name)
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
