"""Elementwise operators: one stage each.

    relu(x)      out[i..] = max(x[i..], 0)
    gelu(x)      out[i..] = 0.5 * x * (1 + erf(x / sqrt(2)))           (the exact, erf form)
    sigmoid, tanh, exp
    add(a, b)    out[i..] = a[bcast(i..)] + b[bcast(i..)]               numpy broadcasting
    sub, mul, div, maximum, minimum                                       either side may be a scalar
                                                                          (integer div truncates)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tilegraph import te
from tilegraph.ops._common import check_float, check_tensor, operator, stage
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor

Scalar = int | float


def float_unary(x: Tensor, fn: Callable[[Expr], Expr], name: str) -> Tensor:
    """One stage out[i..] = fn(x[i..]) of a float tensor (every float unary op is one)."""
    check_tensor(x, "x")
    check_float(x, "x")
    return stage(x.extents, lambda *i: fn(x[i]), name=name)


@operator("relu")
def relu(x: Tensor, name: str = "relu") -> Tensor:
    """max(x, 0)."""
    return float_unary(x, lambda v: te.max_(v, te.const(0.0, v.dtype)), name)


@operator("gelu")
def gelu(x: Tensor, name: str = "gelu") -> Tensor:
    """0.5 * x * (1 + erf(x / sqrt(2))), the exact (erf) form."""
    return float_unary(x, lambda v: v * 0.5 * (te.erf(v * (1.0 / math.sqrt(2.0))) + 1.0), name)


@operator("sigmoid")
def sigmoid(x: Tensor, name: str = "sigmoid") -> Tensor:
    return float_unary(x, te.sigmoid, name)


@operator("tanh")
def tanh(x: Tensor, name: str = "tanh") -> Tensor:
    return float_unary(x, te.tanh, name)


@operator("exp")
def exp(x: Tensor, name: str = "exp") -> Tensor:
    return float_unary(x, te.exp, name)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in np.broadcast_shapes(a, b))
    except ValueError:
        raise ValueError(f"arguments a and b have shapes {a} and {b}, which do not broadcast") from None


def broadcast_extents(a: tuple[int | Expr, ...], b: tuple[int | Expr, ...]) -> tuple[int | Expr, ...]:
    """numpy's broadcasting of two tensors' extents (Tensor.extents), where a run-time dim equals
    only itself (or stretches an extent 1)."""
    if all(isinstance(s, int) for s in (*a, *b)):
        return broadcast_shape(a, b)  # type: ignore[arg-type]
    rank = max(len(a), len(b))
    a1, b1 = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    out: list[int | Expr] = []
    for x, y in zip(a1, b1):
        if isinstance(x, int) and x == 1:
            out.append(y)
        elif (isinstance(y, int) and y == 1) or (type(x) is type(y) and x == y):
            out.append(x)
        else:
            shown = [tuple(str(s) for s in t) for t in (a, b)]
            raise ValueError(f"arguments a and b have extents {shown[0]} and {shown[1]}, which do not broadcast")
    return tuple(out)


def broadcast_read(t: Tensor, out_index: tuple[Expr, ...]) -> Expr:
    """t read at the point of a broadcast output (numpy rules: align right, extent 1 repeats)."""
    lead = len(out_index) - t.ndim
    idx = tuple(0 if extent == 1 else out_index[lead + d] for d, extent in enumerate(t.shape))
    return t[idx]


def _binary(a: Tensor | Scalar, b: Tensor | Scalar, fn: Callable[[Expr, Expr], Expr], name: str) -> Tensor:
    tensors = {arg: v for arg, v in (("a", a), ("b", b)) if isinstance(v, Tensor)}
    for arg, v in (("a", a), ("b", b)):
        if arg not in tensors and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"argument {arg} must be a te.Tensor or a Python number, got {type(v).__name__}")
    if not tensors:
        raise TypeError("at least one of arguments a and b must be a te.Tensor")
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        raise TypeError(f"arguments a and b have different dtypes ({a.dtype} and {b.dtype})")  # type: ignore[union-attr]
    dtype = dtypes.pop()
    shape: tuple[int | Expr, ...] = ()
    for t in tensors.values():
        shape = broadcast_extents(shape, t.extents) if shape else t.extents
    if not shape:
        raise ValueError("arguments a and b are 0-dimensional; tensors need at least one dimension")

    def operand(v: Tensor | Scalar, idx: tuple[Expr, ...]) -> Expr:
        return broadcast_read(v, idx) if isinstance(v, Tensor) else te.const(v, dtype)

    return stage(shape, lambda *i: fn(operand(a, i), operand(b, i)), name=name)


@operator("add")
def add(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "add") -> Tensor:
    return _binary(a, b, lambda x, y: x + y, name)


@operator("sub")
def sub(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "sub") -> Tensor:
    return _binary(a, b, lambda x, y: x - y, name)


@operator("mul")
def mul(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "mul") -> Tensor:
    return _binary(a, b, lambda x, y: x * y, name)


@operator("div")
def div(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "div") -> Tensor:
    """a / b; on integers the quotient truncated toward zero (C's and ONNX's integer Div), and 0
    where b is 0 (no trap: C leaves it undefined)."""
    return _binary(a, b, lambda x, y: x / y if x.dtype.is_float else truncated_division(x, y), name)


def truncated_division(x: Expr, y: Expr) -> Expr:
    """Integer x / y rounded toward zero, from the IR's floor division: the floor quotient plus one
    where the remainder is not zero and the signs differ; 0 where y is 0."""
    zero, one = te.const(0, x.dtype), te.const(1, x.dtype)
    floor_q = x // y
    signs_differ = te.logical_or(te.logical_and(x.lt(zero), y.gt(zero)), te.logical_and(x.gt(zero), y.lt(zero)))
    inexact = te.logical_and((x % y).ne(zero), signs_differ)
    return te.select(y.eq(zero), zero, floor_q + te.select(inexact, one, zero))


@operator("mod")
def mod(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "mod") -> Tensor:
    """a - floor(a / b) * b: the remainder with the divisor's sign (Python's and numpy's %); 0
    where an integer b is 0."""
    return _binary(a, b, lambda x, y: x % y, name)


@operator("fmod")
def fmod(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "fmod") -> Tensor:
    """a - trunc(a / b) * b: the remainder with the dividend's sign (C's fmod and %); integers: 0
    where b is 0; floats: NaN there."""

    def body(x: Expr, y: Expr) -> Expr:
        if x.dtype.is_float:
            q = x / y
            return x - te.select(q.lt(te.const(0.0, x.dtype)), te.ceil(q), te.floor(q)) * y
        zero = te.const(0, x.dtype)
        return te.select(y.eq(zero), zero, x - truncated_division(x, y) * y)

    return _binary(a, b, body, name)


_BIT_SYMBOLS = {"bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}


def _bits_body(op: str) -> Callable[[Expr, Expr], Expr]:
    """The expression of a bitwise op; a shift by an amount outside [0, bits) gives 0 (left) or the
    sign fill, 0 or -1 (right), as ONNX's BitShift defines it (C leaves it undefined)."""
    if op not in ("shl", "shr"):
        return lambda x, y: te.expr.binary(op, x, y)

    def shift(x: Expr, y: Expr) -> Expr:
        zero = te.const(0, x.dtype)
        in_range = te.logical_and(y.ge(zero), y.lt(te.const(x.dtype.bits, y.dtype)))
        shifted = te.expr.binary(op, x, y)
        if op == "shl" or x.dtype.kind == "uint":
            return te.select(in_range, shifted, zero)
        return te.select(in_range, shifted, te.select(x.lt(zero), te.const(-1, x.dtype), zero))

    return shift


def _integer_binary(op: str) -> Callable[..., Tensor]:
    def fn(a: Tensor | Scalar, b: Tensor | Scalar, name: str = op) -> Tensor:
        return _binary(a, b, _bits_body(op), name)

    fn.__name__ = op
    fn.__doc__ = f"{op} of integers (C's {_BIT_SYMBOLS[op]}; shifts out of range: 0, or the sign fill)."
    return operator(op)(fn)


bitand = _integer_binary("bitand")
bitor = _integer_binary("bitor")
bitxor = _integer_binary("bitxor")
shl = _integer_binary("shl")
shr = _integer_binary("shr")


@operator("maximum")
def maximum(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "maximum") -> Tensor:
    return _binary(a, b, te.max_, name)


@operator("minimum")
def minimum(a: Tensor | Scalar, b: Tensor | Scalar, name: str = "minimum") -> Tensor:
    return _binary(a, b, te.min_, name)
