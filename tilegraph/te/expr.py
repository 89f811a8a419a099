"""Scalar expressions shared by tensor expressions (te) and the loop IR.

Every node is an immutable value with structural equality, so nodes can be dict keys and two
programs built separately compare equal. Arithmetic operators build IR (`a + b`), comparisons do
not: use `a.eq(b)`, `a.lt(b)`, ... so that `==` keeps meaning structural equality.

Nodes:
    Var(name, dtype)                    a loop, block or axis variable (identified by name)
    Const(value, dtype)                 a literal
    BinOp(op, a, b)                     op in BINARY_OPS; the result has a's dtype
    Cmp(op, a, b)                       op in COMPARE_OPS; bool result
    Not(a), Select(cond, t, f), Cast(dtype, a)
    Call(name, args, dtype)             a math intrinsic, name in INTRINSICS; lowering also makes
                                        "bf16_dot2" (lower/passes/pair_bf16_products.py) and
                                        "u8s8_dot4" (lower/passes/group_int8_products.py)
    TensorRead(tensor, indices)         te only: reads a te.Tensor
    BufferLoad(buffer, indices)         loop IR only: reads a Buffer (see tilegraph.loop.ir)
    Reduce(combiner, source, axes, init, condition)   te only: top of a reduction compute body

Meaning of the operators (the interpreter implements it; every printer agrees):
    a / b       true division; floats only (integers: TypeError, use //)
    a // b      floor division; a % b its remainder (sign of b), as in Python and numpy.
                For integers x // 0 == x % 0 == 0 and INT_MIN // -1 == INT_MIN: nothing traps.
    8-bit integer results wrap after every operation; int32/int64 overflow is undefined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from tilegraph import dtype as dt
from tilegraph.dtype import DType
from tilegraph.errors import shorten
from tilegraph.hashing import hash_once

if TYPE_CHECKING:
    from tilegraph.te.buffer import Buffer
    from tilegraph.te.tensor import Tensor

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "max", "min", "and", "or", "pow",
              # on integers: bits (C's & | ^) and shifts (C's << >>, the amount below the type's width)
              "bitand", "bitor", "bitxor", "shl", "shr")
BITWISE_OPS = ("bitand", "bitor", "bitxor", "shl", "shr")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
INTRINSICS = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "abs", "floor", "ceil",
              # trigonometric and hyperbolic functions; round: to nearest, ties to even (C rint)
              "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "round")
COMBINERS = ("sum", "max", "min", "prod")


class Expr:
    """Base of all scalar expression nodes. Subclasses are frozen dataclasses with `dtype`."""

    __slots__ = ()
    dtype: DType

    # Arithmetic builds IR. Python numbers are converted to Const of the other operand's dtype.
    def __add__(self, other: ExprLike) -> Expr:
        return binary("add", self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return binary("add", other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return binary("sub", self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return binary("sub", other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return binary("mul", self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return binary("mul", other, self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return binary("div", self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return binary("div", other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary("floordiv", self, other)

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return binary("floordiv", other, self)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary("floormod", self, other)

    def __rmod__(self, other: ExprLike) -> Expr:
        return binary("floormod", other, self)

    def __pow__(self, other: ExprLike) -> Expr:
        return binary("pow", self, other)

    def __neg__(self) -> Expr:
        # floats: IEEE negation (-(+0.0) is -0.0, as in numpy), which 0 - x is not; ints: 0 - x (wraps)
        if self.dtype.is_float:
            return binary("mul", self, Const(-1.0, self.dtype))
        return binary("sub", Const(0, self.dtype), self)

    # Comparisons are explicit builders; `==` stays structural equality.
    def eq(self, other: ExprLike) -> Expr:
        return compare("eq", self, other)

    def ne(self, other: ExprLike) -> Expr:
        return compare("ne", self, other)

    def lt(self, other: ExprLike) -> Expr:
        return compare("lt", self, other)

    def le(self, other: ExprLike) -> Expr:
        return compare("le", self, other)

    def gt(self, other: ExprLike) -> Expr:
        return compare("gt", self, other)

    def ge(self, other: ExprLike) -> Expr:
        return compare("ge", self, other)

    def astype(self, dtype: str | DType) -> Expr:
        return cast(dtype, self)

    def __bool__(self) -> bool:
        raise TypeError("a tilegraph expression has no truth value; use te.select / te.all_of")


ExprLike = Union[Expr, int, float, bool]  # noqa: UP007 (a runtime alias, valid on 3.10)


@hash_once
@dataclass(frozen=True)
class Var(Expr):
    name: str
    dtype: DType = dt.int32

    def __str__(self) -> str:
        return self.name


@hash_once
@dataclass(frozen=True)
class Const(Expr):
    value: Any
    dtype: DType = dt.int32

    def __str__(self) -> str:
        return repr(self.value)


@hash_once
@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.a.dtype


@hash_once
@dataclass(frozen=True)
class Cmp(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return dt.bool_


@hash_once
@dataclass(frozen=True)
class Not(Expr):
    a: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return dt.bool_


@hash_once
@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.true_value.dtype


@hash_once
@dataclass(frozen=True)
class Cast(Expr):
    dtype: DType
    value: Expr


@hash_once
@dataclass(frozen=True)
class Call(Expr):
    name: str
    args: tuple[Expr, ...]
    dtype: DType


@hash_once
@dataclass(frozen=True, eq=False)
class TensorRead(Expr):
    """te only. Equality compares the tensor by identity (tensors are not structural values)."""

    tensor: Tensor
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.tensor.dtype

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TensorRead)
            and other.tensor is self.tensor
            and other.indices == self.indices
        )

    def __hash__(self) -> int:
        return hash((id(self.tensor), self.indices))


@hash_once
@dataclass(frozen=True)
class BufferLoad(Expr):
    """Loop IR only: reads `buffer` at `indices` (one index per buffer dimension)."""

    buffer: Buffer
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.buffer.dtype


@hash_once
@dataclass(frozen=True)
class Ramp(Expr):
    """Lowered IR only: the vector (base, base+stride, ..., base+(lanes-1)*stride)."""

    base: Expr
    stride: int
    lanes: int

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.base.dtype.with_lanes(self.lanes)


@hash_once
@dataclass(frozen=True)
class Broadcast(Expr):
    """Lowered IR only: `value` repeated in `lanes` lanes."""

    value: Expr
    lanes: int

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.value.dtype.with_lanes(self.lanes)


@hash_once
@dataclass(frozen=True)
class IterVar:
    """An axis of a compute: `var` ranges over [0, extent). kind is 'spatial' or 'reduce'.
    With a `bound` (an expression of run-time dims, te/dims.py), it ranges over [0, bound) at run
    time, and `extent` is the bound's upper limit (what storage and loops are sized by)."""

    var: Var
    extent: int
    kind: str = "spatial"
    bound: Expr | None = None


def _delegate_to_var(method: str):  # noqa: ANN202
    def fn(self: IterVar, *args: object) -> Expr:
        return getattr(self.var, method)(*args)

    return fn


# A reduce axis is used like its variable in index expressions: A[i, k * 2 + 1].
for _m in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
           "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "eq", "ne", "lt", "le", "gt", "ge"):
    setattr(IterVar, _m, _delegate_to_var(_m))


@hash_once
@dataclass(frozen=True)
class Reduce(Expr):
    """te only. combiner over `axes` of `source`; `init` defaults to the combiner's identity."""

    combiner: str
    source: Expr
    axes: tuple[IterVar, ...]
    init: Expr | None = None
    condition: Expr | None = None

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.source.dtype


# ---------------------------------------------------------------------------------------------
# Builders


def const(value: ExprLike, dtype: str | DType | None = None) -> Expr:
    """Wrap a Python number (or pass an Expr through)."""
    if isinstance(value, IterVar):
        value = value.var
    if isinstance(value, Expr):
        return value if dtype is None else cast(dtype, value)
    if dtype is None:
        dtype = dt.bool_ if isinstance(value, bool) else dt.int32 if isinstance(value, int) else dt.float32
    dtype = dt.as_dtype(dtype)
    if dtype.is_float:
        return Const(float(value), dtype)
    if dtype.kind == "bool":
        return Const(bool(value), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"the {dtype} constant {value!r} is not an integer")
    info = np.iinfo(dtype.numpy)
    if not info.min <= int(value) <= info.max:
        raise ValueError(f"the constant {shorten(value, 40)} does not fit in {dtype} ([{info.min}, {info.max}])")
    return Const(int(value), dtype)


def _coerce_pair(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    a = a.var if isinstance(a, IterVar) else a
    b = b.var if isinstance(b, IterVar) else b
    if isinstance(a, Expr) and not isinstance(b, Expr):
        return a, const(b, a.dtype if not (isinstance(b, float) and not a.dtype.is_float) else dt.float32)
    if isinstance(b, Expr) and not isinstance(a, Expr):
        return const(a, b.dtype if not (isinstance(a, float) and not b.dtype.is_float) else dt.float32), b
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return const(a), const(b)
    assert isinstance(a, Expr) and isinstance(b, Expr)
    if a.dtype != b.dtype:
        raise TypeError(
            f"operands have different dtypes ({a.dtype} and {b.dtype}); insert an explicit cast"
        )
    return a, b


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}")
    x, y = _coerce_pair(a, b)
    if op == "div" and not x.dtype.is_float:
        raise TypeError(f"'/' is not defined on {x.dtype} operands: use '//' for floor division (and '%' for its "
                        f"remainder), or cast to a float type for true division")
    if op in BITWISE_OPS and not x.dtype.is_int:
        raise TypeError(f"{op} needs integer operands, got {x.dtype}")
    return BinOp(op, x, y)


def compare(op: str, a: ExprLike, b: ExprLike) -> Expr:
    if op not in COMPARE_OPS:
        raise ValueError(f"unknown comparison {op!r}")
    x, y = _coerce_pair(a, b)
    return Cmp(op, x, y)


def cast(dtype: str | DType, value: ExprLike) -> Expr:
    dtype = dt.as_dtype(dtype)
    value = const(value)
    return value if value.dtype == dtype else Cast(dtype, value)


def select(cond: ExprLike, true_value: ExprLike, false_value: ExprLike) -> Expr:
    t, f = _coerce_pair(true_value, false_value)
    return Select(const(cond), t, f)


def max_(a: ExprLike, b: ExprLike) -> Expr:
    return binary("max", a, b)


def min_(a: ExprLike, b: ExprLike) -> Expr:
    return binary("min", a, b)


def logical_and(a: ExprLike, b: ExprLike) -> Expr:
    return binary("and", a, b)


def logical_or(a: ExprLike, b: ExprLike) -> Expr:
    return binary("or", a, b)


def logical_not(a: Expr) -> Expr:
    return Not(a)


def all_of(*conds: Expr) -> Expr:
    """Conjunction of conditions; `all_of()` is true."""
    out: Expr = Const(True, dt.bool_)
    for c in conds:
        out = c if (isinstance(out, Const) and out.value is True) else binary("and", out, c)
    return out


def conjuncts(e: Expr) -> list[Expr]:
    """The terms of a conjunction, in order (`all_of`'s inverse; a literal true has none)."""
    if isinstance(e, BinOp) and e.op == "and":
        return [*conjuncts(e.a), *conjuncts(e.b)]
    return [] if e == Const(True, dt.bool_) else [e]


def call(name: str, *args: ExprLike) -> Expr:
    if name not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {name!r}; known: {', '.join(INTRINSICS)}")
    xs = tuple(const(a) for a in args)
    if not xs[0].dtype.is_float and name != "abs":
        raise TypeError(f"{name} needs a floating-point argument, got {xs[0].dtype}")
    return Call(name, xs, xs[0].dtype)


def exp(x: Expr) -> Expr:
    return call("exp", x)


def log(x: Expr) -> Expr:
    return call("log", x)


def sqrt(x: Expr) -> Expr:
    return call("sqrt", x)


def rsqrt(x: Expr) -> Expr:
    return call("rsqrt", x)


def tanh(x: Expr) -> Expr:
    return call("tanh", x)


def erf(x: Expr) -> Expr:
    return call("erf", x)


def sigmoid(x: Expr) -> Expr:
    return call("sigmoid", x)


def abs_(x: Expr) -> Expr:
    return call("abs", x)


def floor(x: Expr) -> Expr:
    return call("floor", x)


def ceil(x: Expr) -> Expr:
    return call("ceil", x)


def round_(x: Expr) -> Expr:
    """To the nearest integer, ties to even (numpy's round, C's rint)."""
    return call("round", x)


def power(x: ExprLike, y: ExprLike) -> Expr:
    return binary("pow", x, y)


def identity_of(combiner: str, dtype: DType) -> Const:
    """The neutral element of a reduction combiner."""
    if combiner == "sum":
        return Const(0.0 if dtype.is_float else 0, dtype)
    if combiner == "prod":
        return Const(1.0 if dtype.is_float else 1, dtype)
    unsigned = dtype.kind in ("uint", "bool")
    if combiner == "max":
        return Const(-math.inf if dtype.is_float else 0 if unsigned else -(2 ** (dtype.bits - 1)), dtype)
    if combiner == "min":
        if dtype.kind == "bool":
            return Const(True, dtype)
        return Const(math.inf if dtype.is_float else 2 ** (dtype.bits - (0 if unsigned else 1)) - 1, dtype)
    raise ValueError(f"unknown combiner {combiner!r}; known: {', '.join(COMBINERS)}")


def combine(combiner: str, acc: Expr, value: Expr) -> Expr:
    """acc ⊕ value for a reduction combiner."""
    return BinOp(_COMBINER_OPS[combiner], acc, value)


_COMBINER_OPS = {"sum": "add", "max": "max", "min": "min", "prod": "mul"}
