"""Elementwise graph ops: unary maths, broadcasting binary ops, comparisons, where, cast.

    y = relu(x)            y = clip(x, min=0.0, max=6.0)       y = gelu(x, approximate="tanh")
    y = sin(x), cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, floor, ceil, round (ties to even)
    z = add(x, b)          numpy broadcasting; a size-1 constant operand lowers as a scalar
    z = mod(x, b)          the divisor's sign (numpy's %);  z = fmod(x, b): the dividend's sign (C's fmod)
    m = equal(a, b)        -> bool;   y = where(m, a, b);   y = cast(x, to="int64")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph import ops, te
from tilegraph.errors import GraphError
from tilegraph.graph.ir import Node, TensorType, is_float
from tilegraph.graph.ops.registry import OpDef, f64, register, same
from tilegraph.testing import reference as ref


class Unary(OpDef):
    float_only = True
    numpy_fn: Callable[..., np.ndarray] = staticmethod(lambda x: x)
    te_fn: Callable[..., Any] = staticmethod(lambda x: x)
    out_dtype: str | None = None

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        (x,) = types
        if self.float_only and not is_float(x.dtype):
            raise GraphError(f"node {node.name!r} ({node.op}) needs a float input, got {x}")
        return [same(x, dtype=self.out_dtype)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [type(self).numpy_fn(f64(xs[0]), **node.attr_dict)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [type(self).te_fn(args[0], **node.attr_dict)]


def _unary(name: str, numpy_fn: Callable[..., np.ndarray], te_fn: Callable[..., Any], float_only: bool = True,
           out_dtype: str | None = None) -> None:
    cls = type(name, (Unary,), {"numpy_fn": staticmethod(numpy_fn), "te_fn": staticmethod(te_fn),
                                "float_only": float_only, "out_dtype": out_dtype})
    register(name, elementwise=True)(cls)


def _gelu_reference(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    return ref.gelu_tanh(x) if approximate == "tanh" else ref.gelu(x)


def _gelu_lower(x: Any, approximate: str = "none") -> Any:
    return ops.gelu_tanh(x) if approximate == "tanh" else ops.gelu(x)


_unary("relu", lambda x: np.maximum(x, 0), ops.relu)
_unary("sigmoid", ref.sigmoid, ops.sigmoid)
_unary("tanh", np.tanh, ops.tanh)
_unary("exp", np.exp, ops.exp)
_unary("log", np.log, ops.log)
_unary("erf", ref.erf, ops.erf)
_unary("sqrt", np.sqrt, ops.sqrt)
_unary("abs", np.abs, ops.abs, float_only=False)
_unary("reciprocal", lambda x: 1.0 / x, ops.reciprocal)
_unary("neg", np.negative, ops.neg, float_only=False)
_unary("gelu", _gelu_reference, _gelu_lower)
_unary("hard_sigmoid", ref.hard_sigmoid, ops.hard_sigmoid)
_unary("hard_swish", ref.hard_swish, ops.hard_swish)
_unary("clip", lambda x, lo=None, hi=None: np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi),
       ops.clip, float_only=False)
_unary("isnan", np.isnan, ops.isnan, out_dtype="bool")
_unary("floor", np.floor, lambda x: ops.elementwise.float_unary(x, te.floor, "floor"))
_unary("ceil", np.ceil, lambda x: ops.elementwise.float_unary(x, te.ceil, "ceil"))
_unary("round", np.rint, lambda x: ops.elementwise.float_unary(x, te.round_, "round"))  # ties to even


def _intrinsic_unary(name: str, numpy_fn: Callable[..., np.ndarray]) -> None:
    _unary(name, numpy_fn, lambda x: ops.elementwise.float_unary(x, lambda v: te.call(name, v), name))


for _name, _fn in (("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("asin", np.arcsin), ("acos", np.arccos),
                   ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh), ("asinh", np.arcsinh),
                   ("acosh", np.arccosh), ("atanh", np.arctanh)):
    _intrinsic_unary(_name, _fn)


@register("not", elementwise=True)
class LogicalNot(Unary):
    float_only = False
    numpy_fn = staticmethod(np.logical_not)
    te_fn = staticmethod(ops.logical_not)

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        if types[0].dtype != "bool":
            raise GraphError(f"node {node.name!r} (not) needs a bool input, got {types[0]}")
        return [types[0]]


@register("cast", elementwise=True)
class Cast(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        return [same(types[0], dtype=node.attr("to"))]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [xs[0].astype(node.attr("to"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.cast(args[0], node.attr("to"))]


def broadcast(node: Node, types: Sequence[TensorType]) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in np.broadcast_shapes(*(t.shape for t in types)))
    except ValueError:
        raise GraphError(f"node {node.name!r} ({node.op}): shapes {', '.join(map(str, types))} do not broadcast") from None


class Binary(OpDef):
    arity = (2, 2)
    scalar_args = True
    numpy_fn: Callable[..., np.ndarray] = staticmethod(np.add)
    te_fn: Callable[..., Any] = staticmethod(ops.add)
    out_dtype: str | None = None

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        a, b = types
        if a.dtype != b.dtype:
            raise GraphError(f"node {node.name!r} ({node.op}) mixes dtypes {a.dtype} and {b.dtype}")
        return [TensorType(broadcast(node, types), self.out_dtype or a.dtype)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [type(self).numpy_fn(f64(xs[0]), f64(xs[1]))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [type(self).te_fn(args[0], args[1])]


def _binary(name: str, numpy_fn: Callable[..., np.ndarray], te_fn: Callable[..., Any], out_dtype: str | None = None,
            scalar_args: bool = True) -> None:
    cls = type(name, (Binary,), {"numpy_fn": staticmethod(numpy_fn), "te_fn": staticmethod(te_fn),
                                 "out_dtype": out_dtype, "scalar_args": scalar_args})
    register(name, elementwise=True)(cls)


_binary("add", np.add, ops.add)
_binary("sub", np.subtract, ops.sub)
_binary("mul", np.multiply, ops.mul)
_binary("div", ref.div, ops.div)  # integers: truncated toward zero (ONNX's Div), x / 0 is 0
_binary("max", np.maximum, ops.maximum)
_binary("min", np.minimum, ops.minimum)
_binary("pow", np.power, ops.power, scalar_args=False)
_binary("mod", np.mod, ops.mod)  # the divisor's sign (Python's %); integers: x % 0 is 0
_binary("fmod", np.fmod, ops.fmod)  # the dividend's sign (C's fmod); integers: x fmod 0 is 0, floats NaN
for _name, _fn in (("bitand", np.bitwise_and), ("bitor", np.bitwise_or), ("bitxor", np.bitwise_xor),
                   ("shl", lambda a, b: ref.shift(a, b, True)), ("shr", lambda a, b: ref.shift(a, b, False))):
    _binary(_name, _fn, getattr(ops, _name))  # integers only (te refuses others)
_binary("equal", np.equal, ops.equal, out_dtype="bool", scalar_args=False)
_binary("less", np.less, ops.less, out_dtype="bool", scalar_args=False)
_binary("greater", np.greater, ops.greater, out_dtype="bool", scalar_args=False)
_binary("less_equal", np.less_equal, ops.less_equal, out_dtype="bool", scalar_args=False)
_binary("greater_equal", np.greater_equal, ops.greater_equal, out_dtype="bool", scalar_args=False)
_binary("and", np.logical_and, ops.logical_and, out_dtype="bool", scalar_args=False)
_binary("or", np.logical_or, ops.logical_or, out_dtype="bool", scalar_args=False)


@register("where", elementwise=True, arity=(3, 3))
class Where(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        cond, a, b = types
        if cond.dtype != "bool" or a.dtype != b.dtype:
            raise GraphError(f"node {node.name!r} (where) needs a bool condition and equal dtypes, got "
                             f"{', '.join(map(str, types))}")
        return [TensorType(broadcast(node, types), a.dtype)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.where(xs[0], f64(xs[1]), f64(xs[2]))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.where(*args)]
