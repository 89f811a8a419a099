"""More elementwise operators, as the graph level needs them: one stage each.

    sqrt, erf, neg, reciprocal, abs, log        out[i..] = f(x[i..])              (float)
    gelu_tanh(x)       0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))       (GELU's tanh form)
    hard_sigmoid(x)    clip(alpha x + beta, 0, 1);   hard_swish(x) = x * hard_sigmoid(x, 1/6, 1/2)
    clip(x, lo, hi)    min(max(x, lo), hi)       (either bound may be None)
    isnan(x)           x != x  -> bool;           logical_not(x) for bool x
    cast(x, dtype)     C conversion (float -> int truncates toward zero, like numpy's astype)
    power(a, b), equal, less, greater, less_equal, greater_equal   numpy broadcasting; comparisons give bool
    logical_and(a, b), logical_or(a, b)   bool tensors
    where(cond, a, b)  cond ? a : b, all three broadcast
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tilegraph import te
from tilegraph.ops._common import check_float, check_tensor, operator, stage
from tilegraph.ops.elementwise import broadcast_extents, broadcast_read, float_unary
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor


@operator("sqrt")
def sqrt(x: Tensor, name: str = "sqrt") -> Tensor:
    return float_unary(x, te.sqrt, name)


@operator("erf")
def erf(x: Tensor, name: str = "erf") -> Tensor:
    return float_unary(x, te.erf, name)


@operator("log")
def log(x: Tensor, name: str = "log") -> Tensor:
    return float_unary(x, te.log, name)


@operator("neg")
def neg(x: Tensor, name: str = "neg") -> Tensor:
    check_tensor(x, "x")
    return stage(x.extents, lambda *i: te.const(0, x.dtype) - x[i], name=name)


@operator("abs")
def abs(x: Tensor, name: str = "abs") -> Tensor:  # noqa: A001 (the op's name)
    """|x|; integers too (the most negative value wraps to itself, as in C and numpy)."""
    check_tensor(x, "x")
    if x.dtype.is_float:
        return float_unary(x, te.abs_, name)
    zero = te.const(0, x.dtype)
    return stage(x.extents, lambda *i: te.select(x[i].lt(zero), zero - x[i], x[i]), name=name)


@operator("reciprocal")
def reciprocal(x: Tensor, name: str = "reciprocal") -> Tensor:
    return float_unary(x, lambda v: te.const(1.0, v.dtype) / v, name)


@operator("gelu_tanh")
def gelu_tanh(x: Tensor, name: str = "gelu_tanh") -> Tensor:
    c = math.sqrt(2.0 / math.pi)
    return float_unary(x, lambda v: v * 0.5 * (te.tanh((v + v * v * v * 0.044715) * c) + 1.0), name)


def _hard_sigmoid_expr(v: Expr, alpha: float, beta: float) -> Expr:
    zero, one = te.const(0.0, v.dtype), te.const(1.0, v.dtype)
    return te.min_(te.max_(v * alpha + beta, zero), one)


@operator("hard_sigmoid")
def hard_sigmoid(x: Tensor, alpha: float = 0.2, beta: float = 0.5, name: str = "hard_sigmoid") -> Tensor:
    return float_unary(x, lambda v: _hard_sigmoid_expr(v, alpha, beta), name)


@operator("hard_swish")
def hard_swish(x: Tensor, name: str = "hard_swish") -> Tensor:
    return float_unary(x, lambda v: v * _hard_sigmoid_expr(v, 1.0 / 6.0, 0.5), name)


@operator("clip")
def clip(x: Tensor, lo: float | None = None, hi: float | None = None, name: str = "clip") -> Tensor:
    check_tensor(x, "x")

    def body(*i: Expr) -> Expr:
        v = x[i]
        if lo is not None:
            v = te.max_(v, te.const(lo, x.dtype))
        if hi is not None:
            v = te.min_(v, te.const(hi, x.dtype))
        return v

    return stage(x.extents, body, name=name)


@operator("isnan")
def isnan(x: Tensor, name: str = "isnan") -> Tensor:
    check_tensor(x, "x")
    check_float(x, "x")
    return stage(x.extents, lambda *i: x[i].ne(x[i]), name=name)


@operator("logical_not")
def logical_not(x: Tensor, name: str = "logical_not") -> Tensor:
    check_tensor(x, "x")
    if x.dtype.name != "bool":
        raise TypeError(f"argument x must be bool, got {x.dtype}")
    return stage(x.extents, lambda *i: te.logical_not(x[i]), name=name)


@operator("cast")
def cast(x: Tensor, dtype: str, name: str = "cast") -> Tensor:
    check_tensor(x, "x")
    if x.dtype.name == "bool":  # a bool converts to 0/1 in any type
        return stage(x.extents, lambda *i: te.select(x[i], te.const(1, dtype), te.const(0, dtype)), name=name)
    if dtype == "bool":
        return stage(x.extents, lambda *i: x[i].ne(te.const(0, x.dtype)), name=name)
    return stage(x.extents, lambda *i: te.cast(dtype, x[i]), name=name)


def _broadcast(tensors: dict[str, Tensor]) -> tuple[int, ...]:
    shape: tuple[int, ...] = ()
    for arg, t in tensors.items():
        check_tensor(t, arg)
        shape = broadcast_extents(shape, t.extents) if shape else t.extents
    return shape


def _same_dtype_binary(a: Tensor, b: Tensor, fn: Callable[[Expr, Expr], Expr], name: str) -> Tensor:
    shape = _broadcast({"a": a, "b": b})
    if a.dtype != b.dtype:
        raise TypeError(f"arguments a and b have different dtypes ({a.dtype} and {b.dtype})")
    return stage(shape, lambda *i: fn(broadcast_read(a, i), broadcast_read(b, i)), name=name)


@operator("power")
def power(a: Tensor, b: Tensor, name: str = "power") -> Tensor:
    check_float(a, "a")
    return _same_dtype_binary(a, b, te.power, name)


@operator("equal")
def equal(a: Tensor, b: Tensor, name: str = "equal") -> Tensor:
    return _same_dtype_binary(a, b, lambda x, y: x.eq(y), name)


@operator("less")
def less(a: Tensor, b: Tensor, name: str = "less") -> Tensor:
    return _same_dtype_binary(a, b, lambda x, y: x.lt(y), name)


@operator("greater")
def greater(a: Tensor, b: Tensor, name: str = "greater") -> Tensor:
    return _same_dtype_binary(a, b, lambda x, y: y.lt(x), name)


@operator("less_equal")
def less_equal(a: Tensor, b: Tensor, name: str = "less_equal") -> Tensor:
    return _same_dtype_binary(a, b, lambda x, y: x.le(y), name)


@operator("greater_equal")
def greater_equal(a: Tensor, b: Tensor, name: str = "greater_equal") -> Tensor:
    return _same_dtype_binary(a, b, lambda x, y: y.le(x), name)


def _check_bool(*tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype.name != "bool":
            raise TypeError(f"logical ops take bool tensors, got {t.dtype}")


@operator("logical_and")
def logical_and(a: Tensor, b: Tensor, name: str = "logical_and") -> Tensor:
    _check_bool(a, b)
    return _same_dtype_binary(a, b, te.logical_and, name)


@operator("logical_or")
def logical_or(a: Tensor, b: Tensor, name: str = "logical_or") -> Tensor:
    _check_bool(a, b)
    return _same_dtype_binary(a, b, te.logical_or, name)


@operator("where")
def where(cond: Tensor, a: Tensor, b: Tensor, name: str = "where") -> Tensor:
    shape = _broadcast({"cond": cond, "a": a, "b": b})
    if cond.dtype.name != "bool":
        raise TypeError(f"argument cond must be bool, got {cond.dtype}")
    if a.dtype != b.dtype:
        raise TypeError(f"arguments a and b have different dtypes ({a.dtype} and {b.dtype})")
    return stage(shape, lambda *i: te.select(broadcast_read(cond, i), broadcast_read(a, i), broadcast_read(b, i)),
                 name=name)
