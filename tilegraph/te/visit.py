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


def _reduce_children(e: Reduce) -> tuple[Expr, ...]:
    extra = tuple(x for x in (e.init, e.condition) if x is not None)
    return (e.source, *extra)


def _reduce_with_children(e: Reduce, new: tuple[Expr, ...]) -> Expr:
    it = iter(new[1:])
    init = next(it) if e.init is not None else None
    cond = next(it) if e.condition is not None else None
    return Reduce(e.combiner, new[0], e.axes, init, cond)


# One entry per node class, looked up by exact type: the traversals run millions of times while the
# tuner lowers candidates, and a dict lookup is several times cheaper than a chain of isinstance
# tests. A subclass of a node class (none in the package) takes the isinstance path below.
_CHILDREN: dict[type, Callable[[Expr], tuple[Expr, ...]]] = {
    Var: lambda e: (),
    Const: lambda e: (),
    BinOp: lambda e: (e.a, e.b),
    Cmp: lambda e: (e.a, e.b),
    Not: lambda e: (e.a,),
    Select: lambda e: (e.cond, e.true_value, e.false_value),
    Cast: lambda e: (e.value,),
    Call: lambda e: e.args,
    TensorRead: lambda e: e.indices,
    BufferLoad: lambda e: e.indices,
    Reduce: _reduce_children,
    Ramp: lambda e: (e.base,),
    Broadcast: lambda e: (e.value,),
}
_WITH_CHILDREN: dict[type, Callable[[Expr, tuple[Expr, ...]], Expr]] = {
    Var: lambda e, new: e,
    Const: lambda e, new: e,
    BinOp: lambda e, new: BinOp(e.op, new[0], new[1]),
    Cmp: lambda e, new: Cmp(e.op, new[0], new[1]),
    Not: lambda e, new: Not(new[0]),
    Select: lambda e, new: Select(new[0], new[1], new[2]),
    Cast: lambda e, new: Cast(e.dtype, new[0]),
    Call: lambda e, new: Call(e.name, tuple(new), e.dtype),
    TensorRead: lambda e, new: TensorRead(e.tensor, tuple(new)),
    BufferLoad: lambda e, new: BufferLoad(e.buffer, tuple(new)),
    Reduce: _reduce_with_children,
    Ramp: lambda e, new: Ramp(new[0], e.stride, e.lanes),
    Broadcast: lambda e, new: Broadcast(new[0], e.lanes),
}


def _node_class(e: Expr) -> type:
    """The node class `e` is an instance of (a subclass resolves to its base node class)."""
    for cls in _CHILDREN:
        if isinstance(e, cls):
            return cls
    raise TypeError(f"not an expression node: {type(e).__name__}")


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of `e`, in a fixed order."""
    get = _CHILDREN.get(type(e))
    return get(e) if get is not None else _CHILDREN[_node_class(e)](e)


def with_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """A copy of `e` with its children replaced (same order as `children`)."""
    make = _WITH_CHILDREN.get(type(e))
    return make(e, new) if make is not None else _WITH_CHILDREN[_node_class(e)](e, new)


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
