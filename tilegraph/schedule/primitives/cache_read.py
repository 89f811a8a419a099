"""cache_read: one consumer block reads a copy of a buffer, optionally stored in a packed layout.

    for i, j, k:
      block C: C[i, j] += A[i, k] * B[k, j]

        cache_read(C, "B", "global", layout={"split": [[1, 16]], "order": [1, 0, 2]})

    for ax0 in range(N // 16):
      for ax1 in range(K):
        for ax2 in range(16):
          block B_global(v0=ax0, v1=ax1, v2=ax2): B_global[v0, v1, v2] = B[v1, v0 * 16 + v2]
    for i, j, k:
      block C: C[i, j] += A[i, k] * B_global[j // 16, k, j % 16]

The copy buffer is named `<buffer>_<scope>` (made fresh), its block carries the same name and its
loop nest is placed right before the top-level statement that holds the consumer; only that
consumer reads the copy. A layout first splits dimensions (`[dim, factor]`, factor dividing the
extent; dim d becomes (d // factor, d % factor) in place), then permutes the resulting
dimensions by `order`. Copy blocks store at their own iteration point, so compute_at can shrink
them to the region a consumer needs.
"""

from __future__ import annotations

from typing import Any

from tilegraph.loop.edit import replace_buffer, replace_node
from tilegraph.loop.ir import SCOPES, Buffer, Func
from tilegraph.schedule.primitives.common import get_block, require
from tilegraph.schedule.primitives.nest import (
    block_reads,
    block_writes,
    check_dataflow,
    copy_nest,
    fresh_buffer_name,
    insert_beside,
    root_stmt,
)
from tilegraph.te.expr import Const, Expr
from tilegraph.te.simplify import simplify


class Layout:
    """The index map of a packed copy: original indices -> packed indices, and back."""

    def __init__(self, shape: tuple[int, ...], layout: dict[str, Any] | None, where: str):
        layout = dict(layout or {})
        unknown = set(layout) - {"split", "order"}
        require(not unknown, f"{where}: unknown layout keys {sorted(unknown)} (use 'split' and 'order')")
        self.factors: dict[int, int] = {}
        for item in layout.get("split") or []:
            require(isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, int) for x in item),
                    f"{where}: each layout split must be [dim, factor], got {item!r}")
            dim, factor = int(item[0]), int(item[1])
            require(0 <= dim < len(shape), f"{where}: layout split dim {dim} is out of range for {len(shape)} dimensions")
            require(dim not in self.factors, f"{where}: dimension {dim} is split twice in the layout")
            require(factor >= 1 and shape[dim] % factor == 0,
                    f"{where}: layout split factor {factor} does not divide the extent {shape[dim]} of dimension {dim}")
            self.factors[dim] = factor
        # Each split dim d becomes (d, "outer") and (d, "inner") in place.
        self.dims: list[tuple[int, str]] = []
        for d in range(len(shape)):
            self.dims.extend([(d, "outer"), (d, "inner")] if d in self.factors else [(d, "whole")])
        order = layout.get("order")
        if order is None:
            order = list(range(len(self.dims)))
        require(sorted(order) == list(range(len(self.dims))),
                f"{where}: layout order {order} is not a permutation of the {len(self.dims)} dimensions")
        self.order = [int(x) for x in order]
        extents = [self._extent(shape, d) for d in self.dims]
        self.shape = tuple(extents[p] for p in self.order)

    def _extent(self, shape: tuple[int, ...], dim: tuple[int, str]) -> int:
        d, part = dim
        if part == "whole":
            return shape[d]
        f = self.factors[d]
        return shape[d] // f if part == "outer" else f

    def pack(self, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        parts = []
        for d, part in self.dims:
            e = indices[d]
            if part == "outer":
                e = e // Const(self.factors[d])
            elif part == "inner":
                e = e % Const(self.factors[d])
            parts.append(simplify(e))
        return tuple(parts[p] for p in self.order)

    def unpack(self, packed: tuple[Expr, ...]) -> tuple[Expr, ...]:
        by_dim: dict[tuple[int, str], Expr] = {self.dims[p]: packed[n] for n, p in enumerate(self.order)}
        out = []
        for d in range(max(dd for dd, _ in self.dims) + 1):
            if d in self.factors:
                out.append(by_dim[(d, "outer")] * Const(self.factors[d]) + by_dim[(d, "inner")])
            else:
                out.append(by_dim[(d, "whole")])
        return tuple(out)


def layout_in_groups(ndim: int, dim: int, group: int, order: list[int] | None = None) -> dict[str, Any]:
    """The layout that splits dimension `dim` of an `ndim`-dimensional buffer in groups of `group`
    and stores each group's elements last (innermost), the dimensions otherwise in `order` (a
    permutation of range(ndim); identity by default). B[K, N] in groups of 4 along K:

        layout_in_groups(2, 0, 4) == {"split": [[0, 4]], "order": [0, 2, 1]}    # [K // 4, N, 4]
    """
    perm = list(order) if order is not None else list(range(ndim))
    position = {d: d + (1 if d > dim else 0) for d in range(ndim)}  # dim's outer part keeps its place
    return {"split": [[dim, group]], "order": [position[d] for d in perm] + [dim + 1]}


def cache_read(func: Func, block: str, buffer: str, scope: str = "local",
               layout: dict[str, Any] | None = None) -> tuple[Func, tuple[str, ...]]:
    where = f"cache_read({block}, {buffer})"
    require(scope in SCOPES, f"{where}: unknown scope {scope!r}; use one of {SCOPES}")
    consumer = get_block(func, block)
    names = [b.name for b in func.buffers]
    require(buffer in names, f"{where}: no buffer named {buffer!r} (buffers: {names})")
    src = func.buffer(buffer)
    require(block_reads(consumer, buffer), f"{where}: block {block} does not read buffer {buffer}")
    require(not block_writes(consumer, buffer), f"{where}: block {block} also writes {buffer}; cache_write it instead")
    packing = Layout(src.shape, layout, where)
    name = fresh_buffer_name(func, f"{buffer}_{scope}")
    dst = Buffer(name, packing.shape, src.dtype, scope)
    nest, _ = copy_nest(func, name, dst, src, packing.unpack)

    new_consumer = replace_buffer(consumer, buffer, dst, packing.pack, stores=False)
    out = replace_node(func, consumer, new_consumer)
    out = insert_beside(out, root_stmt(out, block), nest, after=False)
    out = Func(out.name, out.params, out.body, (*out.allocs, dst), out.attrs)
    check_dataflow(out, where)
    return out, (name,)


__all__ = ["cache_read", "Layout", "layout_in_groups"]
