"""The arithmetic of integer index expressions: affine forms and interval bounds.

One implementation of each, used by the simplifier (te/simplify.py, which also proves conditions),
region analysis (loop/region.py), the interpreter's lane analysis (loop/lanes.py), the lowering
passes and the Gensor state (tune/gensor/state.py).

    affine(i*64 + (j + 1)*16 - 3)       -> ({i: 64, j: 16}, 13)       atoms in order of first use
    rebuild({i: 64, j: 16}, 13, int32)  -> i*64 + j*16 + 13
    linear_in(i*4 + j, i)               -> (4, j)
    value_bounds(i*4 + j, {"i": (0, 7), "j": (0, 3)})   -> (0, 31)    inclusive, by variable name
    canonical_index((j*32 + 5) - j*32)  -> 5                          atoms' children canonical too

An *atom* is a sub-expression that is not a sum, a difference, or a product with a constant
(`i // 4`, `min(a, b)`, `x * y`); atoms compare structurally, so `i // 4` twice is one atom.
Integer constants are exact Python ints here; wrapping to a dtype is the simplifier's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tilegraph.dtype import DType
from tilegraph.te.expr import BinOp, Cast, Const, Expr, Var
from tilegraph.te.visit import children, walk, with_children

Bounds = tuple[int, int]  # inclusive
Terms = dict[Expr, int]


def int_const(e: Expr) -> int | None:
    """The value of an integer constant (not a bool), else None."""
    if isinstance(e, Const) and e.dtype.is_int and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def affine(e: Expr, through_casts: bool = False, atom: Callable[[Expr], Expr] | None = None) -> tuple[Terms, int]:
    """`e` as (atom -> coefficient, constant): e == sum(c * atom) + constant. Zero coefficients are
    dropped. `through_casts` looks through integer-to-integer casts (index analysis, where values
    fit); `atom` maps each atom to the form stored (canonical_index canonicalises its children)."""
    terms: Terms = {}
    constant = _collect(e, 1, terms, through_casts, atom)
    return {a: c for a, c in terms.items() if c != 0}, constant


def _collect(e: Expr, scale: int, terms: Terms, through_casts: bool, atom: Callable[[Expr], Expr] | None) -> int:
    """Add scale*e into `terms`; returns the constant part. Recursion only descends into strict
    sub-expressions, so a product of two non-constant factors is one atom."""
    value = int_const(e)
    if value is not None:
        return scale * value
    if isinstance(e, BinOp) and e.dtype.is_int and e.dtype.lanes == 1:
        if e.op in ("add", "sub"):
            left = _collect(e.a, scale, terms, through_casts, atom)
            return left + _collect(e.b, scale if e.op == "add" else -scale, terms, through_casts, atom)
        if e.op == "mul":
            left_terms: Terms = {}
            right_terms: Terms = {}
            left = _collect(e.a, 1, left_terms, through_casts, atom)
            right = _collect(e.b, 1, right_terms, through_casts, atom)
            if not any(right_terms.values()):  # e.b is the constant `right`
                return _add_scaled(terms, left_terms, left, scale * right)
            if not any(left_terms.values()):
                return _add_scaled(terms, right_terms, right, scale * left)
            if atom is not None:  # keep the canonical factors inside the product atom
                e = BinOp("mul", rebuild(left_terms, left, e.a.dtype), rebuild(right_terms, right, e.b.dtype))
                terms[e] = terms.get(e, 0) + scale
                return 0
    if through_casts and isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return _collect(e.value, scale, terms, through_casts, atom)
    key = atom(e) if atom is not None else e
    terms[key] = terms.get(key, 0) + scale
    return 0


def _add_scaled(terms: Terms, linear: Terms, constant: int, scale: int) -> int:
    for a, c in linear.items():
        terms[a] = terms.get(a, 0) + scale * c
    return scale * constant


def rebuild(terms: Mapping[Expr, int], constant: int, dtype: DType) -> Expr:
    """c1*a1 + c2*a2 ... + c0 (subtractions for negative coefficients, atoms in the given order)."""
    out: Expr | None = None
    for a, c in terms.items():
        if c == 0:
            continue
        term = a if abs(c) == 1 else BinOp("mul", a, Const(abs(c), dtype))
        if out is None:
            out = term if c > 0 else BinOp("sub", Const(0, dtype), term)
        else:
            out = BinOp("add" if c > 0 else "sub", out, term)
    if out is None:
        return Const(constant, dtype)
    if constant:
        out = BinOp("add" if constant > 0 else "sub", out, Const(abs(constant), dtype))
    return out


def linear_in(e: Expr, v: Var) -> tuple[int, Expr] | None:
    """(coefficient, rest) with e == coefficient * v + rest and rest free of v, or None when `e` is
    not affine in `v` (v inside an atom)."""
    if not any(x == v for x in walk(e)):
        return 0, e
    terms, constant = affine(e)
    coefficient = terms.pop(v, 0)
    if any(x == v for a in terms for x in walk(a)):
        return None
    return coefficient, rebuild(terms, constant, e.dtype)


def canonical_index(e: Expr) -> Expr:
    """Integer sums and constant multiples regrouped as c1*x1 + c2*x2 + ... + c0, atoms in order of
    first use and with canonical children, so that `(j*32 + 5) - j*32` becomes 5."""
    if e.dtype.is_int and e.dtype.lanes == 1 and isinstance(e, BinOp) and e.op in ("add", "sub", "mul"):
        terms, constant = affine(e, atom=_canonical_children)
        return rebuild(terms, constant, e.dtype)
    return _canonical_children(e)


def _canonical_children(e: Expr) -> Expr:
    kids = children(e)
    if not kids:
        return e
    new = tuple(canonical_index(k) for k in kids)
    return e if all(a is b for a, b in zip(new, kids)) else with_children(e, new)


def value_bounds(e: Expr, known: Mapping[str, Bounds]) -> Bounds | None:
    """Inclusive bounds of an integer scalar expression from the bounds of its variables (by
    name), or None when some variable has none or an operation is not covered."""
    if isinstance(e, Const):
        return (e.value, e.value) if int_const(e) is not None else None
    if isinstance(e, Var):
        return known.get(e.name)
    if not isinstance(e, BinOp) or not e.dtype.is_int or e.dtype.lanes != 1:
        return None
    a, b = value_bounds(e.a, known), value_bounds(e.b, known)
    if a is None or b is None:
        return None
    if e.op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if e.op == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if e.op == "mul":
        products = [x * y for x in a for y in b]
        return (min(products), max(products))
    if e.op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if e.op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if e.op in ("floordiv", "floormod") and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if e.op == "floordiv":
            return (a[0] // c, a[1] // c)
        return (a[0] % c, a[1] % c) if a[0] // c == a[1] // c else (0, c - 1)
    return None


def affine_bounds(terms: Mapping[Expr, int], constant: int, known: Mapping[str, Bounds]) -> Bounds | None:
    """Bounds of sum(c * atom) + constant, each atom bounded on its own (tighter than bounding the
    expression tree when an atom occurs with coefficients of both signs)."""
    lo = hi = constant
    for a, c in terms.items():
        b = value_bounds(a, known)
        if b is None:
            return None
        lo += min(c * b[0], c * b[1])
        hi += max(c * b[0], c * b[1])
    return (lo, hi)


def extents_to_bounds(extents: Mapping[str, int]) -> dict[str, Bounds]:
    """{name: extent} of loops running over [0, extent) as inclusive bounds."""
    return {name: (0, n - 1) for name, n in extents.items()}


__all__ = ["Bounds", "Terms", "affine", "affine_bounds", "canonical_index", "extents_to_bounds", "int_const",
           "linear_in", "rebuild", "value_bounds"]
