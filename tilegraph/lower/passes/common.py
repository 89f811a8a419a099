"""Helpers shared by the lowering passes: expression mapping over statements, rewriting with the
ranges of the enclosing loops, and vector lane counts. The arithmetic they use (affine forms,
bounds, canonical indices, proving) is te/arith.py and te/simplify.py; the names are re-exported
here for the passes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from tilegraph.loop.ir import Allocate, Block, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.visit import rewrite_stmt, walk_stmts
from tilegraph.te.arith import Bounds, canonical_index, linear_in, value_bounds
from tilegraph.te.expr import Broadcast, BufferLoad, Const, Expr, Ramp, Var
from tilegraph.te.simplify import prove, simplify
from tilegraph.te.visit import children, rewrite, substitute, walk

NOP = Seq(())
bounds = value_bounds  # the passes' name for it


def map_exprs(s: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """Apply `fn` to every whole expression held by statements under `s` (each store index and
    value, each condition, block binding and predicate)."""

    def on_stmt(x: Stmt) -> Stmt | None:
        if isinstance(x, BufferStore):
            return BufferStore(x.buffer, tuple(fn(i) for i in x.indices), fn(x.value))
        if isinstance(x, IfThenElse):
            return replace(x, cond=fn(x.cond))
        if isinstance(x, Block):
            return replace(x, bindings=tuple(fn(b) for b in x.bindings), predicate=fn(x.predicate))
        return None

    return rewrite_stmt(s, on_stmt)


def map_exprs_with_ranges(s: Stmt, fn: Callable[[Expr, dict[str, Bounds]], Expr]) -> Stmt:
    """Like `map_exprs`, where `fn` also receives the ranges of the loop variables enclosing the
    expression (name -> inclusive bounds)."""

    def on_stmt(x: Stmt, ranges: dict[str, Bounds]) -> Stmt | None:
        if isinstance(x, BufferStore):
            return BufferStore(x.buffer, tuple(fn(i, ranges) for i in x.indices), fn(x.value, ranges))
        if isinstance(x, IfThenElse):
            return replace(x, cond=fn(x.cond, ranges))
        if isinstance(x, Block):
            return replace(x, bindings=tuple(fn(b, ranges) for b in x.bindings), predicate=fn(x.predicate, ranges))
        return None

    return transform_with_ranges(s, on_stmt)


def substitute_stmt(s: Stmt, mapping: Mapping[Var, Expr]) -> Stmt:
    """Replace variables in every expression under `s`, simplifying the results."""
    if not mapping:
        return s
    return map_exprs(s, lambda e: simplify(substitute(e, mapping)))


def map_func(func: Func, fn: Callable[[Stmt], Stmt]) -> Func:
    return replace(func, body=fn(func.body))


def is_true(e: Expr) -> bool:
    return isinstance(e, Const) and e.value is True


def is_false(e: Expr) -> bool:
    return isinstance(e, Const) and e.value is False


def is_nop(s: Stmt) -> bool:
    return isinstance(s, Seq) and all(is_nop(x) for x in s.stmts)


def uses(e: Expr, v: Var) -> bool:
    return any(x == v for x in walk(e))


def lanes_of(e: Expr) -> int:
    """Lane count of a lowered expression (1 for scalars). A load is a vector when its index is a
    Ramp or its buffer holds vectors (registers of a promoted local buffer)."""
    if isinstance(e, (Ramp, Broadcast)):
        return e.lanes
    if isinstance(e, BufferLoad):
        return max(e.buffer.dtype.lanes, *(lanes_of(i) for i in e.indices))
    kids = children(e)
    return max((lanes_of(k) for k in kids), default=1)


def loop_ranges_update(ranges: Mapping[str, Bounds], loop: For) -> dict[str, Bounds]:
    out = dict(ranges)
    out[loop.var.name] = (0, loop.extent - 1)
    return out


def transform_with_ranges(s: Stmt, fn: Callable[[Stmt, dict[str, Bounds]], Stmt | None],
                          ranges: dict[str, Bounds] | None = None) -> Stmt:
    """Bottom-up rewrite like `rewrite_stmt`, where `fn` also receives the ranges of the loop
    variables enclosing the node."""
    ranges = {} if ranges is None else ranges
    if isinstance(s, For):
        inner = loop_ranges_update(ranges, s)
        body = transform_with_ranges(s.body, fn, inner)
        s = s if body is s.body else replace(s, body=body)
    elif isinstance(s, Seq):
        stmts = tuple(transform_with_ranges(x, fn, ranges) for x in s.stmts)
        s = s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)
    elif isinstance(s, IfThenElse):
        then = transform_with_ranges(s.then_body, fn, ranges)
        other = None if s.else_body is None else transform_with_ranges(s.else_body, fn, ranges)
        if then is not s.then_body or other is not s.else_body:
            s = IfThenElse(s.cond, then, other)
    elif isinstance(s, Allocate):
        body = transform_with_ranges(s.body, fn, ranges)
        s = s if body is s.body else replace(s, body=body)
    elif isinstance(s, Block):
        init = None if s.init is None else transform_with_ranges(s.init, fn, ranges)
        body = transform_with_ranges(s.body, fn, ranges)
        if init is not s.init or body is not s.body:
            s = replace(s, init=init, body=body)
    out = fn(s, ranges)
    return s if out is None else out


def all_loop_names(s: Stmt) -> set[str]:
    return {x.var.name for x in walk_stmts(s) if isinstance(x, For)}


def rewrite_loads(e: Expr, fn: Callable[[BufferLoad], Expr | None]) -> Expr:
    return rewrite(e, lambda x: fn(x) if isinstance(x, BufferLoad) else None)


__all__ = ["NOP", "Bounds", "all_loop_names", "bounds", "canonical_index", "is_false", "is_nop", "is_true", "lanes_of",
           "linear_in", "loop_ranges_update", "map_exprs", "map_exprs_with_ranges", "map_func", "prove", "rewrite_loads",
           "substitute_stmt", "transform_with_ranges", "uses"]
