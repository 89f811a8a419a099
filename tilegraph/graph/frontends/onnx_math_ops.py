"""ONNX activations, maths and reductions that graph ops already express (registered into
onnx_ops.CONVERTERS): each converter writes the op's ONNX definition with existing graph ops.

    Softplus(x)      relu(x) + log(1 + exp(-|x|))           (stable where log(1 + exp(x)) overflows)
    LogSoftmax(x)    x - max - log(sum(exp(x - max)))
    ArgMax(x)        min over the axis of where(x == max, index, n)   (the first maximum)
    ReduceL2(x)      sqrt(reduce_sum(x * x))
    Trilu(x, k)      where(constant triangle mask, x, 0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _ints, _out, _rank, converts, dtype_of
from tilegraph.graph.ir import is_float

_INTRINSIC_UNARY = {"Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
                    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
                    "Floor": "floor", "Ceil": "ceil", "Round": "round"}


def _scalar(e: Emitter, value: float, like: str, name: str = "c") -> str:
    """A 0-d constant of `like`'s dtype."""
    return e.constant(np.array(value, dtype=e.type_of(like).dtype), name)


def _float_input(e: Emitter, node: Any, x: str) -> None:
    if not is_float(e.type_of(x).dtype):
        raise GraphError(f"node {node.name!r} ({node.op_type}) needs a float input, got {e.type_of(x)}")


@converts(*_INTRINSIC_UNARY)
def _intrinsic(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit(_INTRINSIC_UNARY[node.op_type], [ins[0]], name=node.name, outputs=[_out(node)])]


@converts("CastLike")
def _cast_like(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit("cast", [ins[0]], {"to": e.type_of(ins[1]).dtype}, node.name, [_out(node)])]


def _finish(e: Emitter, node: Any, y: str) -> list[str]:
    return [e.emit("identity", [y], name=f"{node.name}_out", outputs=[_out(node)])]


def softplus(e: Emitter, x: str, name: str) -> str:
    """relu(x) + log(1 + exp(-|x|)): log(1 + exp(x)) without its overflow."""
    magnitude = e.emit("neg", [e.emit("abs", [x], name=f"{name}_abs")], name=f"{name}_negabs")
    tail = e.emit("log", [e.emit("add", [e.emit("exp", [magnitude], name=f"{name}_exp"), _scalar(e, 1.0, x, "one")],
                                 name=f"{name}_1p")], name=f"{name}_log")
    return e.emit("add", [e.emit("relu", [x], name=f"{name}_relu"), tail], name=f"{name}_sum")


@converts("SwiGLU")
def _swiglu(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Swish_alpha(A) * B."""
    a, b, name = ins[0], ins[1], node.name
    _float_input(e, node, a)
    if e.type_of(a).shape != e.type_of(b).shape:
        raise GraphError(f"node {name!r} (SwiGLU): A {e.type_of(a)} and B {e.type_of(b)} must have one shape")
    alpha = float(attrs.get("alpha", 1.0))
    scaled = e.emit("mul", [a, _scalar(e, alpha, a, "alpha")], name=f"{name}_alpha") if alpha != 1.0 else a
    gate = e.emit("mul", [a, e.emit("sigmoid", [scaled], name=f"{name}_sigmoid")], name=f"{name}_swish")
    return [e.emit("mul", [gate, b], name=name, outputs=[_out(node)])]


@converts("Softplus", "Softsign", "Mish", "Swish")
def _smooth(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    _float_input(e, node, x)
    if node.op_type == "Softplus":
        return _finish(e, node, softplus(e, x, name))
    if node.op_type == "Softsign":
        denominator = e.emit("add", [e.emit("abs", [x], name=f"{name}_abs"), _scalar(e, 1.0, x, "one")], name=f"{name}_1p")
        return _finish(e, node, e.emit("div", [x, denominator], name=name))
    if node.op_type == "Mish":
        return _finish(e, node, e.emit("mul", [x, e.emit("tanh", [softplus(e, x, name)], name=f"{name}_tanh")], name=name))
    alpha = float(attrs.get("alpha", 1.0))
    scaled = e.emit("mul", [x, _scalar(e, alpha, x, "alpha")], name=f"{name}_alpha") if alpha != 1.0 else x
    return _finish(e, node, e.emit("mul", [x, e.emit("sigmoid", [scaled], name=f"{name}_sigmoid")], name=name))


def _expm1_scaled(e: Emitter, x: str, alpha: float, name: str) -> str:
    """alpha * (exp(x) - 1)."""
    em1 = e.emit("sub", [e.emit("exp", [x], name=f"{name}_exp"), _scalar(e, 1.0, x, "one")], name=f"{name}_em1")
    return e.emit("mul", [em1, _scalar(e, alpha, x, "alpha")], name=f"{name}_scaled")


@converts("Elu", "Selu", "Celu", "LeakyRelu", "ThresholdedRelu", "PRelu", "Shrink")
def _piecewise(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name, op = ins[0], node.name, node.op_type
    zero = _scalar(e, 0.0, x, "zero")
    if op in ("Elu", "Selu"):
        alpha = float(attrs.get("alpha", 1.0 if op == "Elu" else 1.67326319217681884765625))
        positive = e.emit("greater", [x, zero], name=f"{name}_pos")
        y = e.emit("where", [positive, x, _expm1_scaled(e, x, alpha, name)], name=name)
        if op == "Selu":
            y = e.emit("mul", [y, _scalar(e, float(attrs.get("gamma", 1.05070102214813232421875)), x, "gamma")],
                       name=f"{name}_gamma")
        return _finish(e, node, y)
    if op == "Celu":
        alpha = float(attrs.get("alpha", 1.0))
        inner = e.emit("div", [x, _scalar(e, alpha, x, "alpha")], name=f"{name}_div")
        negative_part = e.emit("min", [zero, _expm1_scaled(e, inner, alpha, name)], name=f"{name}_min")
        return _finish(e, node, e.emit("add", [e.emit("relu", [x], name=f"{name}_relu"), negative_part], name=name))
    if op in ("LeakyRelu", "PRelu"):
        slope = ins[1] if op == "PRelu" else _scalar(e, float(attrs.get("alpha", 0.01)), x, "alpha")
        negative = e.emit("less", [x, zero], name=f"{name}_neg")
        return _finish(e, node, e.emit("where", [negative, e.emit("mul", [x, slope], name=f"{name}_scaled"), x],
                                       name=name))
    if op == "ThresholdedRelu":
        above = e.emit("greater", [x, _scalar(e, float(attrs.get("alpha", 1.0)), x, "alpha")], name=f"{name}_above")
        return _finish(e, node, e.emit("where", [above, x, zero], name=name))
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    low = e.emit("less", [x, _scalar(e, -lambd, x, "low")], name=f"{name}_low")
    high = e.emit("greater", [x, _scalar(e, lambd, x, "high")], name=f"{name}_high")
    shifted_up = e.emit("add", [x, _scalar(e, bias, x, "bias")], name=f"{name}_up")
    shifted_down = e.emit("sub", [x, _scalar(e, bias, x, "bias")], name=f"{name}_down")
    inner = e.emit("where", [high, shifted_down, zero], name=f"{name}_inner")
    return _finish(e, node, e.emit("where", [low, shifted_up, inner], name=name))


@converts("Sign")
def _sign(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    zero, one, minus_one = (_scalar(e, v, x, n) for v, n in ((0, "zero"), (1, "one"), (-1, "minus_one")))
    negative = e.emit("where", [e.emit("less", [x, zero], name=f"{name}_lt"), minus_one, zero], name=f"{name}_neg")
    y = e.emit("where", [e.emit("greater", [x, zero], name=f"{name}_gt"), one, negative], name=name)
    if is_float(e.type_of(x).dtype):  # sign(NaN) is NaN
        y = e.emit("where", [e.emit("isnan", [x], name=f"{name}_nan"), x, y], name=f"{name}_keep_nan")
    return _finish(e, node, y)


@converts("IsInf")
def _is_inf(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    _float_input(e, node, x)
    tests = []
    if attrs.get("detect_positive", 1):
        tests.append(e.emit("equal", [x, _scalar(e, np.inf, x, "inf")], name=f"{name}_pos"))
    if attrs.get("detect_negative", 1):
        tests.append(e.emit("equal", [x, _scalar(e, -np.inf, x, "minus_inf")], name=f"{name}_neg"))
    if not tests:
        return [e.emit("equal", [x, _scalar(e, np.nan, x, "nan")], name=name, outputs=[_out(node)])]  # all false
    y = tests[0] if len(tests) == 1 else e.emit("or", tests, name=name)
    return _finish(e, node, y)


@converts("Xor")
def _xor(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit("not", [e.emit("equal", ins[:2], name=f"{node.name}_eq")], name=node.name, outputs=[_out(node)])]


@converts("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift")
def _bitwise(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x = ins[0]
    if not e.type_of(x).dtype.startswith(("int", "uint")):
        raise GraphError(f"node {node.name!r} ({node.op_type}) needs integers, got {e.type_of(x)}")
    if node.op_type == "BitwiseNot":  # ~x = x ^ all ones
        ones = e.constant(np.array(-1).astype(e.type_of(x).dtype), f"{node.name}_ones")
        return [e.emit("bitxor", [x, ones], name=node.name, outputs=[_out(node)])]
    if node.op_type == "BitShift":
        direction = attrs.get("direction", "")
        if direction not in ("LEFT", "RIGHT"):
            raise GraphError(f"node {node.name!r} (BitShift): direction {direction!r} is not LEFT or RIGHT")
        op = "shl" if direction == "LEFT" else "shr"
    else:
        op = {"BitwiseAnd": "bitand", "BitwiseOr": "bitor", "BitwiseXor": "bitxor"}[node.op_type]
    return [e.emit(op, ins[:2], name=node.name, outputs=[_out(node)])]


@converts("Mod")
def _mod(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    a, b = ins  # fmod=0 on floats: the divisor's sign, as numpy's mod (allowed since opset 28)
    return [e.emit("fmod" if attrs.get("fmod", 0) else "mod", [a, b], name=node.name, outputs=[_out(node)])]


@converts("Mean")
def _mean(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    acc = ins[0]
    for index, other in enumerate(ins[1:]):
        acc = e.emit("add", [acc, other], name=f"{node.name}_add{index}")
    return [e.emit("div", [acc, _scalar(e, float(len(ins)), ins[0], "count")], name=node.name, outputs=[_out(node)])]


# ---------------------------------------------------------------------------------------- reductions
def reduce_axes(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[int] | None:
    """The reduced axes (None: all), from the axes input (ReduceSum from 13, the others from 18) or
    the attribute; an empty list with noop_with_empty_axes means none."""
    if node.op_type == "ReduceSum" or opset >= 18:
        axes = _ints(e, ins[1], f"node {node.name!r} ({node.op_type}) axes") if len(ins) > 1 and ins[1] else None
    else:
        axes = list(attrs["axes"]) if "axes" in attrs else None
    if not axes and attrs.get("noop_with_empty_axes", 0):
        return []
    return axes or None


def _reduce(e: Emitter, op: str, x: str, axes: list[int] | None, keepdims: int, name: str) -> str:
    return e.emit(op, [x], {"axes": None if axes is None else tuple(axes), "keepdims": keepdims}, name)


@converts("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd")
def _reduce_direct(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x = ins[0]
    axes = reduce_axes(e, node, ins, attrs, opset)
    if axes == []:  # noop_with_empty_axes and no axes: the input as it is
        return _finish(e, node, x)
    op = {"ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max",
          "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod"}[node.op_type]
    if e.type_of(x).dtype == "bool":  # max/min of bools (any/all) through uint8
        if op not in ("reduce_max", "reduce_min"):
            raise GraphError(f"node {node.name!r} ({node.op_type}) of bools is not defined")
        wide = e.emit("cast", [x], {"to": "uint8"}, f"{node.name}_u8")
        y = _reduce(e, op, wide, axes, int(attrs.get("keepdims", 1)), node.name)
        return [e.emit("cast", [y], {"to": "bool"}, f"{node.name}_bool", [_out(node)])]
    return [_reduce_to(e, op, x, axes, int(attrs.get("keepdims", 1)), node.name, _out(node))]


def _reduce_to(e: Emitter, op: str, x: str, axes: list[int] | None, keepdims: int, name: str, out: str) -> str:
    return e.emit(op, [x], {"axes": None if axes is None else tuple(axes), "keepdims": keepdims}, name, [out])


@converts("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _reduce_composed(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name, op = ins[0], node.name, node.op_type
    axes = reduce_axes(e, node, ins, attrs, opset)
    keep = int(attrs.get("keepdims", 1))
    axes_keep = axes  # [] with noop_with_empty_axes: the elementwise part only
    if op == "ReduceLogSumExp":
        if axes_keep == []:
            return _finish(e, node, x)
        peak = _reduce(e, "reduce_max", x, axes, 1, f"{name}_max")
        finite_peak = e.emit("where", [e.emit("isnan", [e.emit("sub", [peak, peak], name=f"{name}_inf")],
                                              name=f"{name}_nonfinite"), _scalar(e, 0.0, x, "zero"), peak],
                             name=f"{name}_peak")  # an infinite max shifts by 0 (the sum keeps its inf)
        exps = e.emit("exp", [e.emit("sub", [x, finite_peak], name=f"{name}_shift")], name=f"{name}_exp")
        total = e.emit("log", [_reduce(e, "reduce_sum", exps, axes, 1, f"{name}_sum")], name=f"{name}_log")
        y = e.emit("add", [total, finite_peak], name=name)
        if not keep:
            y = e.emit("reshape", [y], {"shape": _reduced_shape(e.type_of(x).shape, axes, keep)}, f"{name}_squeeze")
        return _finish(e, node, y)
    term = {"ReduceL1": lambda: e.emit("abs", [x], name=f"{name}_abs"),
            "ReduceL2": lambda: e.emit("mul", [x, x], name=f"{name}_sq"),
            "ReduceSumSquare": lambda: e.emit("mul", [x, x], name=f"{name}_sq"),
            "ReduceLogSum": lambda: x}[op]()
    y = term if axes_keep == [] else _reduce(e, "reduce_sum", term, axes, keep, f"{name}_sum")
    if op == "ReduceL2":
        y = e.emit("sqrt", [y], name=name)
    elif op == "ReduceLogSum":
        y = e.emit("log", [y], name=name)
    return _finish(e, node, y)


def _reduced_shape(shape: tuple[int, ...], axes: list[int] | None, keep: int) -> tuple[int, ...]:
    dims = set(range(len(shape))) if axes is None else {a % len(shape) for a in axes}
    return tuple(1 if d in dims else s for d, s in enumerate(shape) if keep or d not in dims)


def log_softmax(e: Emitter, x: str, axis: int, name: str) -> str:
    """x - max - log(sum(exp(x - max))) along `axis`."""
    shifted = e.emit("sub", [x, _reduce(e, "reduce_max", x, [axis], 1, f"{name}_max")], name=f"{name}_shift")
    total = _reduce(e, "reduce_sum", e.emit("exp", [shifted], name=f"{name}_exp"), [axis], 1, f"{name}_sum")
    return e.emit("sub", [shifted, e.emit("log", [total], name=f"{name}_log")], name=name)


@converts("LogSoftmax")
def _log_softmax(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    _float_input(e, node, ins[0])
    return _finish(e, node, log_softmax(e, ins[0], int(attrs.get("axis", -1)), node.name))


def _positions(e: Emitter, shape: tuple[int, ...], axis: int, dtype: str, name: str) -> str:
    """A constant 0..n-1 along `axis`, shaped to broadcast against `shape`."""
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return e.constant(np.arange(shape[axis], dtype=dtype).reshape(view), name)


def first_extreme_index(e: Emitter, x: str, axis: int, largest: bool, last: bool, name: str) -> str:
    """int64 indices (kept axis) of the first (or last) maximum (or minimum) of x along `axis`."""
    shape = e.type_of(x).shape
    axis %= len(shape)
    extreme = _reduce(e, "reduce_max" if largest else "reduce_min", x, [axis], 1, f"{name}_extreme")
    hit = e.emit("equal", [x, extreme], name=f"{name}_hit")
    if is_float(e.type_of(x).dtype):  # a NaN is the extreme wherever one is (numpy's argmax)
        hit = e.emit("or", [hit, e.emit("isnan", [x], name=f"{name}_nan")], name=f"{name}_hit_nan")
    positions = _positions(e, shape, axis, "int64", f"{name}_positions")
    miss = e.constant(np.array(-1 if last else shape[axis], np.int64), f"{name}_miss")
    candidates = e.emit("where", [hit, positions, miss], name=f"{name}_candidates")
    return _reduce(e, "reduce_max" if last else "reduce_min", candidates, [axis], 1, f"{name}_index")


@converts("ArgMax", "ArgMin")
def _arg_extreme(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x = ins[0]
    shape = e.type_of(x).shape
    axis = int(attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        raise GraphError(f"node {node.name!r} ({node.op_type}): axis {axis} is out of range for rank {len(shape)}")
    index = first_extreme_index(e, x, axis, node.op_type == "ArgMax", bool(attrs.get("select_last_index", 0)),
                                node.name)
    if not attrs.get("keepdims", 1):
        index = e.emit("reshape", [index], {"shape": _reduced_shape(shape, [axis], 0)}, f"{node.name}_squeeze")
    return _finish(e, node, index)


@converts("Hardmax")
def _hardmax(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x = ins[0]
    shape = e.type_of(x).shape
    axis = int(attrs.get("axis", -1)) % len(shape)
    index = first_extreme_index(e, x, axis, True, False, node.name)
    hit = e.emit("equal", [_positions(e, shape, axis, "int64", f"{node.name}_positions"), index], name=f"{node.name}_hit")
    return [e.emit("cast", [hit], {"to": e.type_of(x).dtype}, node.name, [_out(node)])]


@converts("Trilu")
def _trilu(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """where(mask, x, 0): the mask a constant for a constant k, else (column - row) compared with k."""
    x, name = ins[0], node.name
    if _rank(e, x) < 2:
        raise GraphError(f"node {name!r} (Trilu) needs a tensor of rank 2 or more, got {e.type_of(x)}")
    rows, cols = e.type_of(x).shape[-2:]
    upper = bool(attrs.get("upper", 1))
    zero = e.constant(np.zeros((), e.type_of(x).dtype), f"{name}_zero")
    has_k = len(ins) > 1 and ins[1]
    if not has_k or ins[1] in e.constants:
        k = _ints(e, ins[1], f"node {name!r} (Trilu) k")[0] if has_k else 0
        ones = np.ones((rows, cols), dtype=bool)
        mask = e.constant(np.triu(ones, k) if upper else np.tril(ones, k), f"{name}_mask")
    else:
        offset = e.constant(np.arange(cols, dtype=np.int64)[None, :] - np.arange(rows, dtype=np.int64)[:, None],
                            f"{name}_offset")  # column - row
        k = e.emit("reshape", [e.emit("cast", [ins[1]], {"to": "int64"}, f"{name}_k64")], {"shape": ()}, f"{name}_k")
        mask = e.emit("greater_equal" if upper else "less_equal", [offset, k], name=f"{name}_mask")
    return [e.emit("where", [mask, x, zero], name=name, outputs=[_out(node)])]


@converts("EyeLike")
def _eye_like(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = e.type_of(ins[0]).shape
    if len(shape) != 2:
        raise GraphError(f"node {node.name!r} (EyeLike) needs a 2-D input, got {e.type_of(ins[0])}")
    dtype = dtype_of(int(attrs["dtype"]), f"node {node.name!r} (EyeLike)") if "dtype" in attrs else e.type_of(ins[0]).dtype
    return [e.constant(np.eye(*shape, k=int(attrs.get("k", 0)), dtype=dtype), _out(node))]


# ---------------------------------------------------------------------------------------- einsum
def _einsum_terms(equation: str, ranks: list[int], where: str) -> tuple[list[str], str]:
    """Each operand's subscripts and the output's, an ellipsis spelled out as upper-case letters
    (aligned from the right), the implicit output as the letters used once, in order."""
    equation = equation.replace(" ", "")
    inputs_text, _, output_text = equation.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != len(ranks):
        raise GraphError(f"{where}: equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    widest = max((rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks) if "..." in t), default=0)
    ellipsis = "".join(spare[:widest])
    expanded = []
    for t, rank in zip(terms, ranks):
        if "..." in t:
            t = t.replace("...", ellipsis[widest - (rank - len(t.replace("...", ""))):])
        if len(t) != rank or (t and not t.isalpha()):
            raise GraphError(f"{where}: subscripts {t!r} do not fit an operand of rank {rank}")
        expanded.append(t)
    if "->" in equation:
        output = output_text.replace("...", ellipsis)
    else:
        counts = {c: sum(t.count(c) for t in expanded) for c in set("".join(expanded))}
        output = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1 and c.islower()))
    return expanded, output


def _diagonals(e: Emitter, x: str, term: str, where: str, name: str) -> tuple[str, str]:
    """x with each repeated subscript reduced to its diagonal ('ii' -> 'i'): x where an identity
    mask is set, else 0, summed over the second occurrence's axis."""
    while len(set(term)) != len(term):
        first = next(i for i, c in enumerate(term) if term.index(c) != i)
        letter = term[first]
        keep = term.index(letter)
        shape = e.type_of(x).shape
        if shape[keep] != shape[first]:
            raise GraphError(f"{where}: subscript {letter!r} is {shape[keep]} and {shape[first]} in one operand")
        mask_shape = [shape[d] if d in (keep, first) else 1 for d in range(len(shape))]
        eye = np.eye(shape[keep], dtype=bool).reshape(mask_shape)  # where, not a product: inf * 0 is NaN
        zero = e.constant(np.zeros((), e.type_of(x).dtype), f"{name}_zero")
        masked = e.emit("where", [e.constant(eye, f"{name}_eye"), x, zero], name=f"{name}_masked")
        x = e.emit("reduce_sum", [masked], {"axes": (first,), "keepdims": 0}, f"{name}_{letter}")
        term = term[:first] + term[first + 1:]
    return x, term


def _sum_out(e: Emitter, x: str, term: str, keep: set[str], name: str) -> tuple[str, str]:
    """x with the letters not in `keep` summed away."""
    drop = [i for i, c in enumerate(term) if c not in keep]
    if not drop:
        return x, term
    y = e.emit("reduce_sum", [x], {"axes": tuple(drop), "keepdims": 0}, f"{name}_sum")
    return y, "".join(c for c in term if c in keep)


def _arrange(e: Emitter, x: str, term: str, order: str, name: str) -> str:
    if term == order:
        return x
    return e.emit("transpose", [x], {"perm": tuple(term.index(c) for c in order)}, f"{name}_perm")


def _contract(e: Emitter, a: str, ta: str, b: str, tb: str, keep: str, sizes: dict[str, int], name: str
              ) -> tuple[str, str]:
    """a (letters ta) times b (tb), summed over shared letters not in `keep`: one batched matmul."""
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    size = lambda letters: int(np.prod([sizes[c] for c in letters], dtype=np.int64))  # noqa: E731
    a3 = e.emit("reshape", [_arrange(e, a, ta, "".join(batch + left + summed), f"{name}_a")],
                {"shape": (size(batch), size(left), size(summed))}, f"{name}_a3")
    b3 = e.emit("reshape", [_arrange(e, b, tb, "".join(batch + summed + right), f"{name}_b")],
                {"shape": (size(batch), size(summed), size(right))}, f"{name}_b3")
    product = e.emit("matmul", [a3, b3], name=f"{name}_mm")
    letters = batch + left + right
    return e.emit("reshape", [product], {"shape": tuple(sizes[c] for c in letters)}, f"{name}_unflat"), "".join(letters)


@converts("Einsum")
def _einsum(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Sums of products as reductions, transposes and batched matmuls, operand by operand."""
    name, where = node.name or "einsum", f"node {node.name!r} (Einsum)"
    terms, output = _einsum_terms(attrs["equation"], [_rank(e, i) for i in ins], where)
    ins = list(ins)
    for k, (t, x) in enumerate(zip(terms, ins)):
        ins[k], terms[k] = _diagonals(e, x, t, where, f"{name}_diag{k}")
    sizes: dict[str, int] = {}
    for t, x in zip(terms, ins):
        for c, n in zip(t, e.type_of(x).shape):
            if sizes.setdefault(c, n) != n:
                raise GraphError(f"{where}: subscript {c!r} is {sizes[c]} in one operand and {n} in another "
                                 "(broadcasting is not supported)")
    current, term = ins[0], terms[0]
    for index in range(1, len(ins) + 1):
        later = set(output) | set("".join(terms[index:]))
        if index == len(ins):
            current, term = _sum_out(e, current, term, later, f"{name}_{index}")
            break
        current, term = _sum_out(e, current, term, later | set(terms[index]), f"{name}_{index}a")
        other, other_term = _sum_out(e, ins[index], terms[index], later | set(term), f"{name}_{index}b")
        current, term = _contract(e, current, term, other, other_term, "".join(sorted(later)), sizes, f"{name}_{index}")
    return [e.emit("identity", [_arrange(e, current, term, output, name)], name=f"{name}_out", outputs=[_out(node)])]
