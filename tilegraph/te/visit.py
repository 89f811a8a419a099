"""Generic traversal of scalar expressions: rewrite bottom-up, substitute variables, collect vars.

`rewrite(expr, fn)` rebuilds a node only when a child changed, then offers the (possibly new)
node to `fn`, which returns a replacement or None to keep it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from tilegraph.te.expr import (
    BinOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    IterVar,
    Not,
    Ramp,
    Reduce,
    Select,
    TensorRead,
    Var,
)

T = TypeVar("T")


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of `e`, in a fixed order."""
    if isinstance(e, (Var, Const)):
        return ()
    if isinstance(e, (BinOp, Cmp)):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.true_value, e.false_value)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, (TensorRead, BufferLoad)):
        return e.indices
    if isinstance(e, Reduce):
        extra = tuple(x for x in (e.init, e.condition) if x is not None)
        return (e.source, *extra)
    if isinstance(e, Ramp):
        return (e.base,)
    if isinstance(e, Broadcast):
        return (e.value,)
    raise TypeError(f"not an expression node: {type(e).__name__}")


def with_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """A copy of `e` with its children replaced (same order as `children`)."""
    if isinstance(e, (Var, Const)):
        return e
    if isinstance(e, BinOp):
        return BinOp(e.op, new[0], new[1])
    if isinstance(e, Cmp):
        return Cmp(e.op, new[0], new[1])
    if isinstance(e, Not):
        return Not(new[0])
    if isinstance(e, Select):
        return Select(new[0], new[1], new[2])
    if isinstance(e, Cast):
        return Cast(e.dtype, new[0])
    if isinstance(e, Call):
        return Call(e.name, tuple(new), e.dtype)
    if isinstance(e, TensorRead):
        return TensorRead(e.tensor, tuple(new))
    if isinstance(e, BufferLoad):
        return BufferLoad(e.buffer, tuple(new))
    if isinstance(e, Reduce):
        it = iter(new[1:])
        init = next(it) if e.init is not None else None
        cond = next(it) if e.condition is not None else None
        return Reduce(e.combiner, new[0], e.axes, init, cond)
    if isinstance(e, Ramp):
        return Ramp(new[0], e.stride, e.lanes)
    if isinstance(e, Broadcast):
        return Broadcast(new[0], e.lanes)
    raise TypeError(f"not an expression node: {type(e).__name__}")


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild `e` bottom-up; `fn(node)` returns a replacement or None to keep the node."""
    kids = children(e)
    if kids:
        new_kids = tuple([rewrite(k, fn) for k in kids])  # a list, not a generator: this runs millions of times
        for a, b in zip(new_kids, kids):
            if a is not b:
                e = with_children(e, new_kids)
                break
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """Replace variables by expressions (simultaneously)."""
    if not mapping:
        return e
    return rewrite(e, lambda x: mapping.get(x) if isinstance(x, Var) else None)


def preorder(root: T, children_of: Callable[[T], Sequence[T]]) -> Iterator[T]:
    """`root` and every node below it, parents before children, children in order. An explicit
    stack, not nested generators: a node at depth d costs one step, not d (the schedule primitives
    and the lowering walk deep trees millions of times while the tuner samples programs). The one
    traversal of both IRs: `walk` here, loop/visit.py's `walk_stmts`."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        kids = children_of(node)
        if kids:
            stack.extend(reversed(kids))


def walk(e: Expr) -> Iterator[Expr]:
    """All nodes of `e`, parents before children (preorder)."""
    return preorder(e, children)


def free_vars(e: Expr) -> set[Var]:
    """Variables used in `e` (reduction axes of a Reduce are bound, not free)."""
    out = {x for x in walk(e) if isinstance(x, Var)}
    for x in walk(e):
        if isinstance(x, Reduce):
            out -= {a.var for a in x.axes}
    return out


def uses_var(e: Expr, v: Var) -> bool:
    return any(x == v for x in walk(e))


__all__ = ["children", "with_children", "rewrite", "substitute", "walk", "free_vars", "uses_var", "IterVar"]
