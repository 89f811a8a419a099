"""Helpers shared by the lowering passes: expression mapping over statements, integer bounds
(interval arithmetic over loop ranges), linear forms in one variable and vector lane counts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from tilegraph.loop.ir import Allocate, Block, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.visit import rewrite_stmt, walk_stmts
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Cmp, Const, Expr, Ramp, Var
from tilegraph.te.simplify import simplify, value_bounds
from tilegraph.te.visit import children, rewrite, substitute, walk, with_children

Bounds = tuple[int, int]
NOP = Seq(())


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


def bounds(e: Expr, ranges: Mapping[str, Bounds]) -> Bounds | None:
    """Inclusive integer bounds of `e` when every variable in it has a known range, else None."""
    return value_bounds(e, ranges)


def prove(cond: Expr, ranges: Mapping[str, Bounds]) -> bool | None:
    """True/False when `cond` has that value for every point of `ranges`, else None."""
    cond = simplify(cond)
    if isinstance(cond, Const):
        return bool(cond.value)
    if isinstance(cond, BinOp) and cond.op == "and":
        a, b = prove(cond.a, ranges), prove(cond.b, ranges)
        if a is False or b is False:
            return False
        return True if (a and b) else None
    if not isinstance(cond, Cmp):
        return None
    a, b = bounds(cond.a, ranges), bounds(cond.b, ranges)
    if a is None or b is None:
        return None
    lo, hi = a[0] - b[1], a[1] - b[0]  # bounds of a - b
    verdicts = {
        "lt": (hi < 0, lo >= 0), "le": (hi <= 0, lo > 0), "gt": (lo > 0, hi <= 0),
        "ge": (lo >= 0, hi < 0), "eq": (lo == hi == 0, lo > 0 or hi < 0), "ne": (lo > 0 or hi < 0, lo == hi == 0),
    }
    always, never = verdicts[cond.op]
    return True if always else False if never else None


def linear_in(e: Expr, v: Var) -> tuple[int, Expr] | None:
    """(coefficient, rest) with e == coefficient * v + rest and rest free of v, or None when `e`
    is not affine in `v`."""
    if e == v:
        return (1, Const(0, e.dtype))
    if not uses(e, v):
        return (0, e)
    if isinstance(e, BinOp) and e.op in ("add", "sub"):
        a, b = linear_in(e.a, v), linear_in(e.b, v)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "add" else -1
        return (a[0] + sign * b[0], simplify(BinOp(e.op, a[1], b[1])))
    if isinstance(e, BinOp) and e.op == "mul":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, Const) and y.dtype.is_int:
                inner = linear_in(x, v)
                if inner is None:
                    return None
                return (inner[0] * y.value, simplify(BinOp("mul", inner[1], y)))
    return None


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


def canonical_index(e: Expr) -> Expr:
    """Integer sums and constant multiples regrouped as c1*x1 + c2*x2 + ... + c0 (atoms in order of
    first use), so that `(j*32 + 5) - j*32` becomes 5. Other expressions are rebuilt around
    canonical children."""
    if e.dtype.is_int and e.dtype.lanes == 1 and isinstance(e, BinOp) and e.op in ("add", "sub", "mul"):
        terms: dict[Expr, int] = {}
        constant = _collect(e, 1, terms)
        return _rebuild(terms, constant, e)
    return _canonical_children(e)


def _canonical_children(e: Expr) -> Expr:
    """`e` with every child canonical (`e` itself is not regrouped)."""
    kids = children(e)
    if not kids:
        return e
    new = tuple(canonical_index(k) for k in kids)
    return e if all(a is b for a, b in zip(new, kids)) else with_children(e, new)


def _collect(e: Expr, scale: int, terms: dict[Expr, int]) -> int:
    """Add scale*e into `terms` (atom -> coefficient); returns the constant part.

    Recursion only ever descends into strict sub-expressions of `e`: an atom is `e` rebuilt
    around canonical children, never `e` canonicalised again (a product of two non-constant
    factors, such as `(min(a, 9) - max(b, 0)) * (min(c, 9) - max(d, 0))`, is such an atom)."""
    if isinstance(e, Const) and e.dtype.is_int:
        return scale * e.value
    if isinstance(e, BinOp) and e.op in ("add", "sub"):
        a = _collect(e.a, scale, terms)
        b = _collect(e.b, scale if e.op == "add" else -scale, terms)
        return a + b
    if isinstance(e, BinOp) and e.op == "mul":
        left_terms: dict[Expr, int] = {}
        right_terms: dict[Expr, int] = {}
        left = _collect(e.a, 1, left_terms)
        right = _collect(e.b, 1, right_terms)
        if not any(right_terms.values()):  # e.b is the constant `right`
            return _add_scaled(terms, left_terms, left, scale * right)
        if not any(left_terms.values()):
            return _add_scaled(terms, right_terms, right, scale * left)
        atom: Expr = BinOp("mul", _rebuild(left_terms, left, e.a), _rebuild(right_terms, right, e.b))
    else:
        atom = _canonical_children(e)
    terms[atom] = terms.get(atom, 0) + scale
    return 0


def _add_scaled(terms: dict[Expr, int], linear: dict[Expr, int], constant: int, scale: int) -> int:
    """Add scale * (linear + constant) into `terms`; returns the constant part."""
    for atom, coef in linear.items():
        terms[atom] = terms.get(atom, 0) + scale * coef
    return scale * constant


def _rebuild(terms: dict[Expr, int], constant: int, like: Expr) -> Expr:
    d = like.dtype
    out: Expr | None = None
    for atom, coef in terms.items():
        if coef == 0:
            continue
        term = atom if abs(coef) == 1 else BinOp("mul", atom, Const(abs(coef), d))
        if out is None:
            out = term if coef > 0 else BinOp("sub", Const(0, d), term)
        else:
            out = BinOp("add" if coef > 0 else "sub", out, term)
    if out is None:
        return Const(constant, d)
    if constant:
        out = BinOp("add" if constant > 0 else "sub", out, Const(abs(constant), d))
    return out
