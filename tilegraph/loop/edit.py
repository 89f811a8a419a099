"""Editing loop-IR statements: every helper that builds a changed copy of a statement tree.

The IR is immutable; an edit rebuilds the path from the root to what changed and shares the rest
(a node whose children all come back identical is returned itself, so `new is old` says nothing
changed). Read-only traversal (children, walks, finding loops and blocks) is loop/visit.py.

    rewrite_stmt(s, fn)               bottom-up: fn(node) returns a replacement or None to keep it
    transform_with_ranges(s, fn)      the same, fn also given the enclosing loops' ranges
    replace_node(func, node, new)     one node, found by identity
    map_exprs(s, fn)                  fn on every whole expression statements hold
    map_stmt_exprs(s, fn)             an expression rewrite (te/visit.rewrite) inside every one of them
    substitute_stmt(s, {v: e})        variables replaced, the changed expressions simplified
    replace_buffer(s, "A", B, f)      loads/stores of A pointed at B, indices mapped by f
    map_loads(s, fn)                  fn on every buffer load

For example, substitute_stmt(for j in 0..4: C[i*4+j] = A[i*4+j], {i: 2}) is
for j in 0..4: C[8+j] = A[8+j].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from tilegraph.loop.ir import (
    Allocate,
    AllReduce,
    Barrier,
    Block,
    Buffer,
    BufferStore,
    For,
    Func,
    IfThenElse,
    Prefetch,
    Seq,
    Stmt,
    TileProduct,
)
from tilegraph.loop.visit import stmt_children
from tilegraph.te.arith import Bounds
from tilegraph.te.expr import BufferLoad, Expr, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import rewrite, substitute


def stmt_with_children(s: Stmt, new: tuple[Stmt, ...]) -> Stmt:
    """`s` with its children (in stmt_children's order) replaced by `new`."""
    if isinstance(s, (BufferStore, Barrier, AllReduce, TileProduct, Prefetch)):
        return s
    if isinstance(s, Seq):
        return Seq(tuple(new))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, new[0], new[1] if len(new) > 1 else None)
    if isinstance(s, (For, Allocate)):
        return replace(s, body=new[0])
    if isinstance(s, Block):
        return replace(s, body=new[-1], init=new[0] if s.init is not None else None)
    raise TypeError(f"not a statement node: {type(s).__name__}")


def rewrite_stmt(s: Stmt, fn: Callable[[Stmt], Stmt | None]) -> Stmt:
    """Rebuild `s` bottom-up; `fn(node)` returns a replacement or None to keep the node."""
    kids = stmt_children(s)
    if kids:
        new_kids = tuple(rewrite_stmt(k, fn) for k in kids)
        if any(a is not b for a, b in zip(new_kids, kids)):
            s = stmt_with_children(s, new_kids)
    out = fn(s)
    return s if out is None else out


def loop_ranges_update(ranges: Mapping[str, Bounds], loop: For) -> dict[str, Bounds]:
    out = dict(ranges)
    out[loop.var.name] = (0, loop.extent - 1)
    return out


def transform_with_ranges(s: Stmt, fn: Callable[[Stmt, dict[str, Bounds]], Stmt | None],
                          ranges: dict[str, Bounds] | None = None) -> Stmt:
    """Bottom-up rewrite like `rewrite_stmt`, where `fn` also receives the ranges of the loop
    variables enclosing the node (name -> inclusive bounds)."""
    ranges = {} if ranges is None else ranges
    if isinstance(s, For):
        inner = loop_ranges_update(ranges, s)
        body = transform_with_ranges(s.body, fn, inner)
        s = s if body is s.body else replace(s, body=body)
    else:
        kids = stmt_children(s)
        new_kids = tuple(transform_with_ranges(k, fn, ranges) for k in kids)
        if any(a is not b for a, b in zip(new_kids, kids)):
            s = stmt_with_children(s, new_kids)
    out = fn(s, ranges)
    return s if out is None else out


def replace_node(func: Func, target: Stmt, new: Stmt) -> Func:
    """A copy of `func` where the node `target` (found by identity) is replaced by `new`."""
    return replace(func, body=_rewrite_identity(func.body, target, new))


def _rewrite_identity(s: Stmt, target: Stmt, new: Stmt) -> Stmt:
    if s is target:
        return new
    kids = stmt_children(s)
    if not kids:
        return s
    new_kids = tuple(_rewrite_identity(k, target, new) for k in kids)
    if all(a is b for a, b in zip(new_kids, kids)):
        return s
    return stmt_with_children(s, new_kids)


def map_func(func: Func, fn: Callable[[Stmt], Stmt]) -> Func:
    return replace(func, body=fn(func.body))


def _with_exprs(x: Stmt, fn: Callable[[Expr], Expr]) -> Stmt | None:
    """One statement node with `fn` applied to the expressions it holds directly (visit.stmt_exprs)."""
    if isinstance(x, BufferStore):
        return BufferStore(x.buffer, tuple(fn(i) for i in x.indices), fn(x.value))
    if isinstance(x, IfThenElse):
        return replace(x, cond=fn(x.cond))
    if isinstance(x, Block):
        return replace(x, bindings=tuple(fn(b) for b in x.bindings), predicate=fn(x.predicate))
    if isinstance(x, TileProduct):
        return replace(x, acc_at=fn(x.acc_at), a_at=fn(x.a_at), b_at=fn(x.b_at))
    if isinstance(x, Prefetch):
        return replace(x, index=fn(x.index))
    return None


def map_exprs(s: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """Apply `fn` to every whole expression held by statements under `s` (each store index and
    value, each condition, block binding and predicate)."""
    return rewrite_stmt(s, lambda x: _with_exprs(x, fn))


def map_exprs_with_ranges(s: Stmt, fn: Callable[[Expr, dict[str, Bounds]], Expr]) -> Stmt:
    """Like `map_exprs`, where `fn` also receives the ranges of the loop variables enclosing the
    expression (name -> inclusive bounds)."""
    return transform_with_ranges(s, lambda x, ranges: _with_exprs(x, lambda e: fn(e, ranges)))


def map_stmt_exprs(s: Stmt, fn: Callable[[Expr], Expr | None]) -> Stmt:
    """Apply an expression rewrite (te/visit.rewrite: bottom-up, fn returns a replacement or None)
    inside every expression held by statements under `s`."""
    return map_exprs(s, lambda e: rewrite(e, fn))


def substitute_stmt(s: Stmt, mapping: Mapping[Var, Expr]) -> Stmt:
    """Replace variables in every expression under `s`, simplifying the results."""
    if not mapping:
        return s
    return map_exprs(s, lambda e: simplify(substitute(e, mapping)))


def rewrite_loads(e: Expr, fn: Callable[[BufferLoad], Expr | None]) -> Expr:
    """`e` with `fn` applied to its buffer loads (None keeps a load)."""
    return rewrite(e, lambda x: fn(x) if isinstance(x, BufferLoad) else None)


def map_loads(s: Stmt, fn: Callable[[BufferLoad], Expr | None]) -> Stmt:
    """`s` with `fn` applied to every buffer load in its expressions (None keeps a load)."""
    return map_stmt_exprs(s, lambda e: fn(e) if isinstance(e, BufferLoad) else None)


def replace_buffer(s: Stmt, old_name: str, new: Buffer,
                   index_map: Callable[[tuple[Expr, ...]], tuple[Expr, ...]] | None = None,
                   loads: bool = True, stores: bool = True) -> Stmt:
    """Point loads and/or stores of buffer `old_name` at `new`, mapping their indices (a tile
    product's origins too: there the map must shift, as its tiles' rows keep their strides)."""
    remap = index_map or (lambda idx: idx)

    def on_expr(e: Expr) -> Expr | None:
        if loads and isinstance(e, BufferLoad) and e.buffer.name == old_name:
            return BufferLoad(new, remap(e.indices))
        return None

    def on_stmt(x: Stmt) -> Stmt | None:
        if isinstance(x, TileProduct):  # its origins move as an index does (the map must be a shift)
            x = replace(x, acc_at=rewrite(x.acc_at, on_expr), a_at=rewrite(x.a_at, on_expr), b_at=rewrite(x.b_at, on_expr))
            if stores and x.acc.name == old_name:
                x = replace(x, acc=new, acc_at=remap((x.acc_at,))[0])
            if loads and x.a.name == old_name:
                x = replace(x, a=new, a_at=remap((x.a_at,))[0])
            if loads and x.b.name == old_name:
                x = replace(x, b=new, b_at=remap((x.b_at,))[0])
            return x
        if isinstance(x, BufferStore):
            idx = tuple(rewrite(i, on_expr) for i in x.indices)
            value = rewrite(x.value, on_expr)
            if stores and x.buffer.name == old_name:
                return BufferStore(new, remap(idx), value)
            return BufferStore(x.buffer, idx, value)
        if isinstance(x, Allocate) and x.buffer.name == old_name:
            return replace(x, buffer=new)
        if isinstance(x, Prefetch):  # an address the loads' map moves too
            index = rewrite(x.index, on_expr)
            if loads and x.buffer.name == old_name:
                return replace(x, buffer=new, index=remap((index,))[0])
            return replace(x, index=index)
        return None

    return rewrite_stmt(s, on_stmt)


__all__ = ["loop_ranges_update", "map_exprs", "map_exprs_with_ranges", "map_func", "map_loads", "map_stmt_exprs",
           "replace_buffer", "replace_node", "rewrite_loads", "rewrite_stmt", "stmt_with_children", "substitute_stmt",
           "transform_with_ranges"]
