"""Arithmetic simplification of integer index expressions and constant folding.

    simplify(e)                         # rules below
    simplify(e, {j_1: 4, j_2: 16})      # also uses 0 <= j_1 < 4, 0 <= j_2 < 16

Rules (applied bottom-up until nothing changes at a node):
    c1 op c2 -> c                x + 0, 0 + x, x - 0, x * 1, 1 * x -> x     x * 0 -> 0
    (x + c1) + c2 -> x + (c1+c2)  (x * c1) * c2 -> x * (c1*c2)
    x // 1 -> x                  x % 1 -> 0
    (x * c) // c -> x            (x * c) % c -> 0          (for c > 0)
    (M + R) // c -> M/c + R // c,  (M + R) % c -> R % c    (M: the terms whose coefficients c divides)
    R // c -> k, R % c -> R - k*c        when every value of R lies in [k*c, (k+1)*c) (needs ranges)

For example, with j_1 in [0, 4) and j_2 in [0, 16):
    (j_0*64 + j_1*16 + j_2) // 64  ->  j_0          (j_0*64 + j_1*16 + j_2) % 64  ->  j_1*16 + j_2

Integer division and modulo are floor division / floor modulo (Python semantics), so both
decompositions hold for negative values too. Affine forms and bounds of sub-expressions come from
te/arith.py (interval arithmetic over the variable ranges; a variable without a range has no
bounds). `prove(cond, known)` decides a condition over the ranges when the bounds settle it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from tilegraph.dtype import DType, round_to, wrap_int
from tilegraph.te.arith import Bounds, affine, affine_bounds, rebuild, value_bounds
from tilegraph.te.expr import BinOp, Cmp, Const, Expr, Select, Var
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
_NO_BOUNDS: Mapping[str, Bounds] = {}


def _const(value: int, dtype: DType) -> Const:
    """An integer constant folded into its dtype: two's-complement wrap, as every backend computes."""
    return Const(bool(value), dtype) if dtype.kind == "bool" else Const(wrap_int(value, dtype), dtype)


def _may_fold(value: int, dtype: DType) -> bool:
    """Whether a rewrite may introduce the constant `value`: 8-bit arithmetic wraps, so any value
    does (mod 256); for int32/int64, whose overflow is undefined, only one that fits, or the
    rewrite could overflow where the program did not (x - INT_MIN is not x + INT_MIN)."""
    return dtype.bits < 32 or wrap_int(value, dtype) == value


_FLOAT_FOLD = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum,
    "floordiv": lambda x, y: np.floor(x / y), "floormod": np.mod,
}


def _float_fold(op: str, a: float, b: float, dtype: DType) -> Const:
    """Fold in the dtype's own precision (float32 rounds each step) with NaN-propagating max/min
    and the IR's floordiv/floormod. Folding here, not in a backend compiler, keeps constants
    independent of it (PoCL folds floor(0.0f / 0.0f) to -1.7e-10 instead of NaN)."""
    # the constants as their dtype holds them; bfloat16 computes in float32 and rounds back
    x, y = dtype.value_numpy.type(round_to(a, dtype)), dtype.value_numpy.type(round_to(b, dtype))
    with np.errstate(all="ignore"):
        value = _FLOAT_FOLD[op](x, y)
    return Const(round_to(float(value), dtype), dtype)


def _is(e: Expr, value: object) -> bool:
    return isinstance(e, Const) and e.value == value and not isinstance(e.value, bool)


def _step(e: Expr, known: Mapping[str, Bounds]) -> Expr | None:
    if isinstance(e, Cmp) and isinstance(e.a, Const) and isinstance(e.b, Const):
        return Const(bool(_CMP_FOLD[e.op](e.a.value, e.b.value)), e.dtype)
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.true_value if e.cond.value else e.false_value
    if not isinstance(e, BinOp):
        return None
    a, b, op = e.a, e.b, e.op
    is_int = e.dtype.is_int
    if isinstance(a, Const) and isinstance(b, Const):
        if e.dtype.is_float and op in _FLOAT_FOLD:
            return _float_fold(op, a.value, b.value, e.dtype)
        if op in _FOLD:
            return _const(_FOLD[op](a.value, b.value), e.dtype)
        if is_int and op in _INT_FOLD and b.value != 0:
            return _const(_INT_FOLD[op](a.value, b.value), e.dtype)
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
        if isinstance(b, Const) and isinstance(a, BinOp) and a.op == "add" and isinstance(a.b, Const) \
                and _may_fold(a.b.value + b.value, e.dtype):
            return _simp(BinOp("add", a.a, _const(a.b.value + b.value, e.dtype)), known)
    if op == "sub":
        if _is(b, 0):
            return a
        if a == b:
            return Const(0, e.dtype)
        if isinstance(b, Const) and _may_fold(-b.value, e.dtype):
            return _simp(BinOp("add", a, _const(-b.value, e.dtype)), known)
    if op == "mul":
        if _is(a, 1):
            return b
        if _is(b, 1):
            return a
        if _is(a, 0) or _is(b, 0):
            return Const(0, e.dtype)
        if isinstance(a, Const):
            return BinOp("mul", b, a)
        if isinstance(b, Const) and isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const) \
                and _may_fold(a.b.value * b.value, e.dtype):
            return BinOp("mul", a.a, _const(a.b.value * b.value, e.dtype))
    if e.dtype.bits < 32:
        # 8-bit arithmetic wraps at every operation, so the division rules below (which reason
        # about exact products and value ranges) do not hold; wrapping sums and products do.
        return None
    if op == "floordiv" and isinstance(b, Const) and b.value > 0:
        if b.value == 1:
            return a
        if isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const) and a.b.value % b.value == 0:
            return _simp(BinOp("mul", a.a, Const(a.b.value // b.value, e.dtype)), known)
        return _fold_div_mod(e, known)
    if op == "floormod" and isinstance(b, Const) and b.value > 0:
        if b.value == 1:
            return Const(0, e.dtype)
        if isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const) and a.b.value % b.value == 0:
            return Const(0, e.dtype)
        return _fold_div_mod(e, known)
    return None


def _fold_div_mod(e: BinOp, known: Mapping[str, Bounds]) -> Expr | None:
    """`a // c` or `a % c` for an affine `a` = M + R (M: terms that c divides, constant included
    as far as c divides it). Returns None when no rule applies."""
    if e.dtype.lanes != 1 or not isinstance(e.b, Const):
        return None
    c = e.b.value
    terms, constant = affine(e.a)
    multiple = {x: k // c for x, k in terms.items() if k % c == 0 and k != 0}
    rest = {x: k for x, k in terms.items() if k % c != 0}
    q, r = divmod(constant, c)
    rest_bounds = affine_bounds(rest, r, known)
    if rest_bounds is not None and rest_bounds[0] // c == rest_bounds[1] // c:
        k = rest_bounds[0] // c
        if e.op == "floordiv":
            return _affine_expr(multiple, q + k, e.dtype, known)
        if not multiple and q == 0 and k == 0:
            return e.a
        return _affine_expr(rest, r - k * c, e.dtype, known)
    coarser = _fold_by_a_divisor(e, terms, constant, c, known)
    if coarser is not None:
        return coarser
    if not multiple and q == 0:
        return None
    remainder = _affine_expr(rest, r, e.dtype, known)
    if e.op == "floormod":
        return _simp(BinOp("floormod", remainder, e.b), known)
    quotient = _simp(BinOp("floordiv", remainder, e.b), known)
    return _simp(BinOp("add", _affine_expr(multiple, q, e.dtype, known), quotient), known)


def _fold_by_a_divisor(e: BinOp, terms: Mapping[Expr, int], constant: int, c: int,
                       known: Mapping[str, Bounds]) -> Expr | None:
    """a = g*Q + R with g a divisor of c and every value of R in [0, g): a // c = Q // (c/g) and
    a % c = (Q % (c/g))*g + R. The 8-lane tile of a 16-channel group, (co_0*32 + co_1*8 + co_2) // 16
    with co_2 in [0, 8), becomes (co_0*4 + co_1) // 2: free of the lane variable, so a load it
    indexes is a broadcast, not a gather."""
    for g in _proper_divisors(c):
        quotient = {x: k // g for x, k in terms.items() if k % g == 0}
        rest = {x: k for x, k in terms.items() if k % g}
        q, r = divmod(constant, g)
        bounds = affine_bounds(rest, r, known)
        if not rest or not quotient or bounds is None or bounds[0] < 0 or bounds[1] >= g:
            continue
        inner = _affine_expr(quotient, q, e.dtype, known)
        outer = Const(c // g, e.dtype)
        if e.op == "floordiv":
            return _simp(BinOp("floordiv", inner, outer), known)
        high = BinOp("mul", _simp(BinOp("floormod", inner, outer), known), Const(g, e.dtype))
        return _simp(BinOp("add", high, _affine_expr(rest, r, e.dtype, known)), known)
    return None


@functools.lru_cache(maxsize=1024)
def _proper_divisors(c: int) -> tuple[int, ...]:
    """The divisors of `c` in [2, c // 2], largest first (trial division to sqrt(c): a loop over
    every g below c // 2 cost ~c steps, and c is often a flattened extent in the hundreds of thousands)."""
    small = [d for d in range(2, math.isqrt(c) + 1) if c % d == 0]
    return tuple(sorted({g for d in small for g in (d, c // d) if g <= c // 2}, reverse=True))


def _affine_expr(terms: Mapping[Expr, int], constant: int, dtype: DType, known: Mapping[str, Bounds]) -> Expr:
    return simplify_bounded(rebuild(terms, constant, dtype), known)


def _simp(e: Expr, known: Mapping[str, Bounds]) -> Expr:
    for _ in range(8):
        out = _step(e, known)
        if out is None or out == e:
            return e
        e = out
    return e


def simplify(e: Expr, ranges: Mapping[Var, int] | None = None) -> Expr:
    """Constant-fold and apply the algebraic rules above, bottom-up. `ranges` gives an extent per
    variable (the variable lies in [0, extent)); it lets floordiv/floormod of affine indices fold."""
    if not ranges:
        return rewrite(e, lambda x: _simp(x, _NO_BOUNDS))
    known: dict[str, Bounds] = {}
    for var, extent in ranges.items():
        if not isinstance(var, Var):
            raise TypeError(f"simplify: ranges keys must be Var, got {type(var).__name__}")
        if not isinstance(extent, int) or isinstance(extent, bool) or extent < 1:
            raise ValueError(f"simplify: ranges[{var.name}] must be a positive int extent, got {extent!r}")
        known[var.name] = (0, extent - 1)
    return simplify_bounded(e, known)


def simplify_bounded(e: Expr, known: Mapping[str, Bounds]) -> Expr:
    """`simplify` with inclusive bounds per variable name (the form lowering passes keep)."""
    return rewrite(e, lambda x: _simp(x, known))


def prove(cond: Expr, known: Mapping[str, Bounds]) -> bool | None:
    """True/False when `cond` has that value for every point of the ranges `known`, else None."""
    cond = simplify(cond)
    if isinstance(cond, Const):
        return bool(cond.value)
    if isinstance(cond, BinOp) and cond.op == "and":
        a, b = prove(cond.a, known), prove(cond.b, known)
        if a is False or b is False:
            return False
        return True if (a and b) else None
    if not isinstance(cond, Cmp):
        return None
    a, b = value_bounds(cond.a, known), value_bounds(cond.b, known)
    if a is None or b is None:
        return None
    lo, hi = a[0] - b[1], a[1] - b[0]  # bounds of a - b
    verdicts = {
        "lt": (hi < 0, lo >= 0), "le": (hi <= 0, lo > 0), "gt": (lo > 0, hi <= 0),
        "ge": (lo >= 0, hi < 0), "eq": (lo == hi == 0, lo > 0 or hi < 0), "ne": (lo > 0 or hi < 0, lo == hi == 0),
    }
    always, never = verdicts[cond.op]
    return True if always else False if never else None


__all__ = ["Bounds", "prove", "simplify", "simplify_bounded", "value_bounds"]
