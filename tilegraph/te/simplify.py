"""Arithmetic simplification of integer index expressions and constant folding.

Rules (applied bottom-up until nothing changes at a node):
    c1 op c2 -> c                x + 0, 0 + x, x - 0, x * 1, 1 * x -> x     x * 0 -> 0
    (x + c1) + c2 -> x + (c1+c2)  (x * c1) * c2 -> x * (c1*c2)
    x // 1 -> x                  x % 1 -> 0
    (x * c) // c -> x            (x * c) % c -> 0          (for c > 0)
Integer division and modulo are floor division / floor modulo (Python semantics).
"""

from __future__ import annotations

from tilegraph.te.expr import BinOp, Cmp, Const, Expr, Select
from tilegraph.te.visit import rewrite

_FOLD = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "max": max,
    "min": min,
}
_INT_FOLD = {"floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b}
_CMP_FOLD = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _is(e: Expr, value: object) -> bool:
    return isinstance(e, Const) and e.value == value and not isinstance(e.value, bool)


def _step(e: Expr) -> Expr | None:
    if isinstance(e, Cmp) and isinstance(e.a, Const) and isinstance(e.b, Const):
        return Const(bool(_CMP_FOLD[e.op](e.a.value, e.b.value)), e.dtype)
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.true_value if e.cond.value else e.false_value
    if not isinstance(e, BinOp):
        return None
    a, b, op = e.a, e.b, e.op
    is_int = e.dtype.is_int
    if isinstance(a, Const) and isinstance(b, Const):
        if op in _FOLD:
            return Const(_FOLD[op](a.value, b.value), e.dtype)
        if is_int and op in _INT_FOLD and b.value != 0:
            return Const(_INT_FOLD[op](a.value, b.value), e.dtype)
        if op == "and":
            return Const(bool(a.value and b.value), e.dtype)
        if op == "or":
            return Const(bool(a.value or b.value), e.dtype)
        return None
    if op == "and":
        if isinstance(a, Const):
            return b if a.value else a
        if isinstance(b, Const):
            return a if b.value else b
    if op == "or":
        if isinstance(a, Const):
            return a if a.value else b
        if isinstance(b, Const):
            return b if b.value else a
    if not is_int:
        return None
    if op == "add":
        if _is(a, 0):
            return b
        if _is(b, 0):
            return a
        if isinstance(a, Const):
            return BinOp("add", b, a)
        if isinstance(b, Const) and isinstance(a, BinOp) and a.op == "add" and isinstance(a.b, Const):
            return _simp(BinOp("add", a.a, Const(a.b.value + b.value, e.dtype)))
    if op == "sub":
        if _is(b, 0):
            return a
        if a == b:
            return Const(0, e.dtype)
        if isinstance(b, Const):
            return _simp(BinOp("add", a, Const(-b.value, e.dtype)))
    if op == "mul":
        if _is(a, 1):
            return b
        if _is(b, 1):
            return a
        if _is(a, 0) or _is(b, 0):
            return Const(0, e.dtype)
        if isinstance(a, Const):
            return BinOp("mul", b, a)
        if isinstance(b, Const) and isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const):
            return BinOp("mul", a.a, Const(a.b.value * b.value, e.dtype))
    if op == "floordiv" and isinstance(b, Const) and b.value > 0:
        if b.value == 1:
            return a
        if isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const) and a.b.value % b.value == 0:
            return _simp(BinOp("mul", a.a, Const(a.b.value // b.value, e.dtype)))
    if op == "floormod" and isinstance(b, Const) and b.value > 0:
        if b.value == 1:
            return Const(0, e.dtype)
        if isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const) and a.b.value % b.value == 0:
            return Const(0, e.dtype)
    return None


def _simp(e: Expr) -> Expr:
    for _ in range(8):
        out = _step(e)
        if out is None or out == e:
            return e
        e = out
    return e


def simplify(e: Expr) -> Expr:
    """Constant-fold and apply the algebraic rules above, bottom-up."""
    return rewrite(e, _simp)
