"""Core ATen ops on run-time tensors as graph ops (ATEN: short op name -> converter).

A converter gets the Emitter, the fx node, its arguments (graph tensor names for run-time
tensors, torch.Tensor for constants, Python values otherwise) and returns a graph tensor name
(or a tuple of them for ops with several outputs, read by getitem).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.ir import is_float

ATEN: dict[str, Callable[..., Any]] = {}


def numpy_of(value: Any) -> np.ndarray:
    """A torch tensor (or number) as a numpy array without a copy where torch allows one."""
    if hasattr(value, "detach"):
        value = value.detach()
        if str(value.dtype) == "torch.bfloat16" or str(value.dtype) == "torch.float16":
            value = value.float()
        return value.cpu().contiguous().numpy()
    return np.asarray(value)


def aten(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            ATEN[name] = fn
        return fn

    return wrap


class TorchEmitter(Emitter):
    """An Emitter that turns torch constants into graph constants once each, named after the
    parameter or buffer they came from."""

    def __init__(self, name: str):
        super().__init__(name)
        self.constant_names: dict[int, str] = {}  # id(torch tensor) -> the name its graph constant gets
        self.torch_constants: dict[tuple[int, str | None], tuple[Any, str]] = {}  # (id, dtype) -> (tensor, name)


def tensor(e: TorchEmitter, value: Any, like: str | None = None, dtype: str | None = None) -> str:
    """A graph tensor for a run-time name, a constant tensor or a Python number (in `dtype`, else
    `like`'s dtype). A torch constant (a parameter, a buffer, a folded value) becomes one graph
    constant however often it is used (tied weights stay one copy)."""
    if isinstance(value, str):
        return value if dtype is None or e.type_of(value).dtype == dtype else e.emit("cast", [value], {"to": dtype})
    if isinstance(value, (bool, int, float)) and (dtype or like) is not None:
        return e.constant(np.array(value, dtype=dtype or e.type_of(like).dtype), "scalar")
    key = (id(value), dtype)
    if key not in e.torch_constants:  # the value is kept alive beside its name, so its id is never reused
        array = numpy_of(value)
        e.torch_constants[key] = (value, e.constant(array if dtype is None else array.astype(dtype),
                                                    e.constant_names.get(id(value), "const")))
    return e.torch_constants[key][1]


def _runtime(args: list[Any]) -> str:
    for a in args:
        if isinstance(a, str):
            return a
    raise GraphError("no run-time tensor among the arguments")


def _standin(e: Emitter, value: Any, torch: Any) -> Any:
    """What torch.result_type needs of an argument: its dtype and whether it has dimensions."""
    if isinstance(value, str):
        t = e.type_of(value)
        return torch.empty((1,) if t.shape else (), dtype=getattr(torch, t.dtype))
    return value


def promoted(e: Emitter, args: list[Any]) -> str:
    """ATen's type promotion of two operands (tensors with dimensions over 0-d ones over Python
    numbers, by category), as a graph dtype."""
    import torch

    return str(torch.result_type(_standin(e, args[0], torch), _standin(e, args[1], torch))).replace("torch.", "")


FLOAT = "float32"  # torch's default dtype: what true division of integers gives


def _binary(op: str) -> Callable[..., Any]:
    def convert(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
        dtype = promoted(e, args)
        if op == "div" and kwargs.get("rounding_mode") is None and not is_float(dtype):
            dtype = FLOAT  # true division
        if op in ("and", "or"):
            if dtype != "bool" and "logical" not in str(node.target):
                raise GraphError(f"bitwise {op} of {dtype} tensors is not supported (only of bools)")
            dtype = "bool"
        a, b = tensor(e, args[0], dtype=dtype), tensor(e, args[1], dtype=dtype)
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        if op in ("add", "sub") and alpha != 1:
            b = e.emit("mul", [b, tensor(e, alpha, dtype=dtype)])
        if op == "div" and kwargs.get("rounding_mode") is not None:
            return rounded_division(e, a, b, kwargs["rounding_mode"], node.name)
        return e.emit(op, [a, b], name=node.name)

    return convert


def rounded_division(e: Emitter, a: str, b: str, mode: str, name: str) -> str:
    """a / b rounded toward zero ("trunc") or down ("floor"), as torch.div's rounding modes: on
    integers from the graph's truncating division, on floats from floor/ceil of the quotient."""
    dtype = e.type_of(a).dtype
    zero = tensor(e, 0, dtype=dtype)
    q = e.emit("div", [a, b])  # floats: the quotient; integers: truncated toward zero
    if is_float(dtype):
        if mode == "floor":
            return e.emit("floor", [q], name=name)
        return e.emit("where", [e.emit("less", [q, zero]), e.emit("ceil", [q]), e.emit("floor", [q])], name=name)
    if mode == "trunc":
        return e.emit("identity", [q], name=name)
    if mode != "floor":
        raise GraphError(f"unknown rounding_mode {mode!r}")
    r = e.emit("sub", [a, e.emit("mul", [q, b])])
    inexact = e.emit("not", [e.emit("equal", [r, zero])])
    signs = e.emit("not", [e.emit("equal", [e.emit("less", [r, zero]), e.emit("less", [b, zero])])])
    return e.emit("where", [e.emit("and", [inexact, signs]), e.emit("sub", [q, tensor(e, 1, dtype=dtype)]), q],
                  name=name)


for _aten, _op in {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow", "maximum": "max",
                   "minimum": "min", "eq": "equal", "lt": "less", "gt": "greater", "le": "less_equal",
                   "ge": "greater_equal", "bitwise_and": "and", "logical_and": "and", "bitwise_or": "or",
                   "logical_or": "or"}.items():
    aten(_aten)(_binary(_op))


@aten("floor_divide")
def _floor_divide(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    dtype = promoted(e, args)
    return rounded_division(e, tensor(e, args[0], dtype=dtype), tensor(e, args[1], dtype=dtype), "floor", node.name)


@aten("ne")
def _ne(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    dtype = promoted(e, args)
    return e.emit("not", [e.emit("equal", [tensor(e, args[0], dtype=dtype), tensor(e, args[1], dtype=dtype)])],
                  name=node.name)


TRIGONOMETRIC = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
FLOAT_UNARY = {"sigmoid", "tanh", "exp", "log", "erf", "sqrt", "reciprocal", "hard_swish", "floor", "ceil", "round",
               *TRIGONOMETRIC}


def _unary(op: str) -> Callable[..., Any]:
    def convert(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
        x = args[0]
        if op in ("floor", "ceil") and not is_float(e.type_of(x).dtype):
            return e.emit("identity", [x], name=node.name)  # integers are their own floor
        if op in FLOAT_UNARY and not is_float(e.type_of(x).dtype):
            x = e.emit("cast", [x], {"to": FLOAT})  # torch computes these of integers in its default float
        return e.emit(op, [x], name=node.name)

    return convert


for _aten, _op in {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "erf": "erf",
                   "sqrt": "sqrt", "abs": "abs", "neg": "neg", "reciprocal": "reciprocal", "logical_not": "not",
                   "bitwise_not": "not", "hardswish": "hard_swish", "alias": "identity", "clone": "identity",
                   "detach": "identity", "lift_fresh_copy": "identity", "contiguous": "identity", "floor": "floor",
                   "ceil": "ceil", "round": "round", **{t: t for t in TRIGONOMETRIC}}.items():
    aten(_aten)(_unary(_op))


@aten("log1p", "expm1")
def _log1p_expm1(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    """log(1 + x) and exp(x) - 1, written out (the graph has no fused intrinsic for them)."""
    x = args[0]
    if not is_float(e.type_of(x).dtype):
        x = e.emit("cast", [x], {"to": FLOAT})
    one = e.constant(np.array(1.0, e.type_of(x).dtype), "one")
    if "log1p" in str(node.target):
        return e.emit("log", [e.emit("add", [x, one])], name=node.name)
    return e.emit("sub", [e.emit("exp", [x]), one], name=node.name)


@aten("native_group_norm")
def _group_norm(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple:
    """(x - mean) / sqrt(var + eps) over (channels of a group, spatial), then per-channel affine."""
    x, weight, bias, n, c, _, groups, eps = args
    shape = e.type_of(x).shape
    per_group = int(np.prod(shape[1:], dtype=np.int64)) // int(groups)
    grouped = e.emit("reshape", [x], {"shape": (shape[0], int(groups), per_group)})
    mean = e.emit("reduce_mean", [grouped], {"axes": (2,), "keepdims": 1})
    centred = e.emit("sub", [grouped, mean])
    variance = e.emit("reduce_mean", [e.emit("mul", [centred, centred])], {"axes": (2,), "keepdims": 1})
    eps_c = e.constant(np.array(float(eps), e.type_of(x).dtype), "eps")
    inv = e.emit("reciprocal", [e.emit("sqrt", [e.emit("add", [variance, eps_c])])])
    y = e.emit("reshape", [e.emit("mul", [centred, inv])], {"shape": shape})
    view = (int(c),) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = e.emit("mul", [y, e.emit("reshape", [tensor(e, weight)], {"shape": view})])
    if bias is not None:
        y = e.emit("add", [y, e.emit("reshape", [tensor(e, bias)], {"shape": view})])
    return (e.emit("identity", [y], name=node.name), None, None)


@aten("upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d")
def _upsample(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    """Resize of the last two axes through the interpolation tables (frontends/interpolation.py);
    output sizes come from PyTorch's own (static) shape of the node."""
    from tilegraph.graph.frontends.interpolation import resize_axis

    x = args[0]
    short = str(node.target).split(".")[1]
    mode = {"upsample_nearest2d": "nearest", "upsample_bilinear2d": "linear", "upsample_bicubic2d": "cubic"}[short]
    align = bool(args[2]) if mode != "nearest" and len(args) > 2 and isinstance(args[2], bool) else \
        bool(kwargs.get("align_corners", False))
    out_shape = tuple(int(d) for d in node.meta["val"].shape)
    scales: list[float] = []  # scale factors when the call gave them (.vec: a list; .default: scales_h, scales_w)
    for a in [*args[2:], kwargs.get("scale_factors"), kwargs.get("scales_h"), kwargs.get("scales_w")]:
        if isinstance(a, (list, tuple)):
            scales.extend(float(v) for v in a if isinstance(v, (int, float)) and not isinstance(v, bool))
        elif isinstance(a, float):
            scales.append(a)
    coordinate = "align_corners" if align else ("asymmetric" if mode == "nearest" else "pytorch_half_pixel")
    y = x
    for offset, axis in enumerate((2, 3)):
        n_in, n_out = e.type_of(x).shape[axis], out_shape[axis]
        scale = float(scales[offset]) if len(scales) > offset and not align else n_out / n_in
        y = resize_axis(e, y, axis, mode, coordinate, n_in, n_out, scale, f"{node.name}_axis{axis}",
                        nearest_mode="floor", cubic_a=-0.75)
    return e.emit("identity", [y], name=node.name)


@aten("rsqrt")
def _rsqrt(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("reciprocal", [e.emit("sqrt", [args[0]])], name=node.name)


@aten("silu")
def _silu(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("mul", [args[0], e.emit("sigmoid", [args[0]])], name=node.name)


@aten("hardsigmoid")
def _hardsigmoid(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("hard_sigmoid", [args[0]], {"alpha": 1 / 6, "beta": 0.5}, node.name)


@aten("gelu")
def _gelu(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("gelu", [args[0]], {"approximate": kwargs.get("approximate", "none")}, node.name)


@aten("hardtanh", "clamp")
def _clip(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    lo = args[1] if len(args) > 1 else kwargs.get("min_val", kwargs.get("min", -1.0 if "hardtanh" in str(node.target) else None))
    hi = args[2] if len(args) > 2 else kwargs.get("max_val", kwargs.get("max", 1.0 if "hardtanh" in str(node.target) else None))
    bounds = {k: float(v) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    return e.emit("clip", [args[0]], bounds, node.name)


@aten("where")
def _where(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    like = _runtime(args[1:]) if any(isinstance(a, str) for a in args[1:]) else None
    cond = tensor(e, args[0])
    a = tensor(e, args[1], like) if like else tensor(e, args[1])
    b = tensor(e, args[2], like or a)
    if e.type_of(a).dtype != e.type_of(b).dtype:
        b = e.emit("cast", [b], {"to": e.type_of(a).dtype})
    return e.emit("where", [cond, a, b], name=node.name)


@aten("_to_copy")
def _to_copy(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    dtype = kwargs.get("dtype")
    if dtype is None:
        return e.emit("identity", [args[0]], name=node.name)
    return e.emit("cast", [args[0]], {"to": str(dtype).replace("torch.", "")}, node.name)


# ---------------------------------------------------------------------------------------- nn
@aten("convolution")
def _convolution(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    x, w, b, stride, padding, dilation, transposed, _, groups = args
    rank = len(e.type_of(x).shape)
    if transposed or rank not in (3, 4):
        raise GraphError("only 1-D and 2-D non-transposed convolutions are supported")
    w = tensor(e, w)
    if rank == 3:  # 1-D: a 2-D convolution of height 1
        n, c, length = e.type_of(x).shape
        x = e.emit("reshape", [x], {"shape": (n, c, 1, length)}, f"{node.name}_2d")
        w = e.emit("reshape", [w], {"shape": (*e.type_of(w).shape[:2], 1, e.type_of(w).shape[2])}, f"{node.name}_w2d")
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
    inputs = [x, w] + ([tensor(e, b)] if b is not None else [])
    attrs = {"layout": "NCHW", "strides": tuple(stride), "pads": (*padding, *padding), "dilations": tuple(dilation),
             "groups": int(groups)}
    y = e.emit("conv2d", inputs, attrs, node.name)
    if rank == 3:
        out = e.type_of(y).shape
        y = e.emit("reshape", [y], {"shape": (out[0], out[1], out[3])}, f"{node.name}_1d")
    return y


@aten("_native_batch_norm_legit_no_training")
def _batch_norm(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple:
    x, weight, bias, mean, var, _, eps = args
    channels = e.type_of(x).shape[1]
    weight = tensor(e, weight) if weight is not None else e.constant(np.ones(channels, np.float32), "ones")
    bias = tensor(e, bias) if bias is not None else e.constant(np.zeros(channels, np.float32), "zeros")
    y = e.emit("batch_norm", [x, weight, bias, tensor(e, mean), tensor(e, var)], {"epsilon": float(eps), "axis": 1},
               node.name)
    return (y, None, None)


@aten("native_layer_norm")
def _layer_norm(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple:
    x, shape, weight, bias, eps = args
    norm = tuple(shape)
    weight = tensor(e, weight) if weight is not None else e.constant(np.ones(norm, np.float32), "ones")
    bias = tensor(e, bias) if bias is not None else e.constant(np.zeros(norm, np.float32), "zeros")
    y = e.emit("layer_norm", [x, weight, bias], {"axis": -len(norm), "epsilon": float(eps)}, node.name)
    return (y, None, None)


@aten("addmm")
def _addmm(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    bias, a, b = args[:3]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    like = _runtime([a, b, bias])
    y = e.emit("matmul", [tensor(e, a), tensor(e, b)], name=node.name)
    if alpha != 1:
        y = e.emit("mul", [y, tensor(e, alpha, like)])
    if beta != 0:
        c = tensor(e, bias)
        if beta != 1:
            c = e.emit("mul", [c, tensor(e, beta, like)])
        y = e.emit("add", [y, c], name=f"{node.name}_bias")
    return y


@aten("mm", "bmm", "matmul")
def _mm(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("matmul", [tensor(e, args[0]), tensor(e, args[1])], name=node.name)


@aten("_softmax", "softmax")
def _softmax(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("softmax", [args[0]], {"axis": int(args[1])}, node.name)


def _reduce(op: str) -> Callable[..., Any]:
    def convert(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
        x = args[0]
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        axes = None if dims is None or dims == [] else tuple([dims] if isinstance(dims, int) else dims)
        if op == "any":
            as_float = e.emit("cast", [x], {"to": "float32"})
            y = e.emit("reduce_max", [as_float], {"axes": axes, "keepdims": int(bool(keep))})
            return e.emit("cast", [y], {"to": "bool"}, node.name)
        return e.emit(op, [x], {"axes": axes, "keepdims": int(bool(keep))}, node.name)

    return convert


aten("mean")(_reduce("reduce_mean"))
aten("sum")(_reduce("reduce_sum"))
aten("amax")(_reduce("reduce_max"))
aten("any")(_reduce("any"))


@aten("max_pool2d_with_indices", "max_pool2d")
def _max_pool(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    x, kernel = args[0], tuple(args[1])
    stride = tuple(args[2]) if len(args) > 2 and args[2] else kernel
    padding = tuple(args[3]) if len(args) > 3 else (0, 0)
    if (len(args) > 4 and tuple(args[4]) != (1, 1)) or (len(args) > 5 and args[5]):
        raise GraphError("dilated or ceil-mode max pooling is not supported")
    y = e.emit("max_pool2d", [x], {"kernel": kernel, "strides": stride, "pads": (*padding, *padding),
                                   "layout": "NCHW"}, node.name)
    return (y, None) if "with_indices" in str(node.target) else y


@aten("avg_pool2d")
def _avg_pool(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    x, kernel = args[0], tuple(args[1])
    stride = tuple(args[2]) if len(args) > 2 and args[2] else kernel
    padding = tuple(args[3]) if len(args) > 3 else (0, 0)
    ceil, include_pad = (args[4] if len(args) > 4 else False), (args[5] if len(args) > 5 else True)
    if ceil or (include_pad and any(padding)):
        x = e.emit("pad", [x], {"before": (0, 0, *padding), "after": (0, 0, *padding), "value": 0.0}) if any(
            padding) else x
        padding = (0, 0)
        if ceil:
            raise GraphError("ceil-mode average pooling is not supported")
    return e.emit("avg_pool2d", [x], {"kernel": kernel, "strides": stride, "pads": (*padding, *padding),
                                      "layout": "NCHW"}, node.name)


@aten("embedding")
def _embedding(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("gather", [tensor(e, args[0]), tensor(e, args[1])], {"axis": 0}, node.name)


@aten("index_select")
def _index_select(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("gather", [tensor(e, args[0]), tensor(e, args[2])], {"axis": int(args[1])}, node.name)


@aten("gather")
def _gather(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    return e.emit("gather_elements", [tensor(e, args[0]), tensor(e, args[2])], {"axis": int(args[1])}, node.name)


@aten("index")
def _index(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    x, indices = tensor(e, args[0]), args[1]
    used = [(axis, i) for axis, i in enumerate(indices) if i is not None]
    if len(used) != 1:
        raise GraphError("advanced indexing with more than one index tensor is not supported")
    axis, index = used[0]
    return e.emit("gather", [x, tensor(e, index)], {"axis": axis}, node.name)


@aten("constant_pad_nd")
def _pad(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    x, pads = args[0], list(args[1])
    value = float(args[2]) if len(args) > 2 else 0.0
    rank = len(e.type_of(x).shape)
    before, after = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):  # torch lists (last axis before, after), then the axis before it, ...
        before[rank - 1 - i], after[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    return e.emit("pad", [x], {"before": tuple(before), "after": tuple(after), "value": value}, node.name)


# ---------------------------------------------------------------------------------------- shapes
def _shape(e: Emitter, x: str) -> tuple[int, ...]:
    return e.type_of(x).shape


@aten("view", "_unsafe_view", "reshape")
def _view(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    shape = [int(s) for s in args[1]]
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        shape[shape.index(-1)] = int(np.prod(_shape(e, args[0]))) // max(known, 1)
    return e.emit("reshape", [args[0]], {"shape": tuple(shape)}, node.name)


@aten("unsqueeze")
def _unsqueeze(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    shape = list(_shape(e, args[0]))
    shape.insert(int(args[1]) % (len(shape) + 1), 1)
    return e.emit("reshape", [args[0]], {"shape": tuple(shape)}, node.name)


@aten("squeeze")
def _squeeze(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    shape = _shape(e, args[0])
    dims = args[1] if len(args) > 1 else [d for d, s in enumerate(shape) if s == 1]
    dims = {d % len(shape) for d in ([dims] if isinstance(dims, int) else dims) if shape[d % len(shape)] == 1}
    return e.emit("reshape", [args[0]], {"shape": tuple(s for d, s in enumerate(shape) if d not in dims)}, node.name)


@aten("permute")
def _permute(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    rank = len(_shape(e, args[0]))
    return e.emit("transpose", [args[0]], {"perm": tuple(int(p) % rank for p in args[1])}, node.name)


@aten("t", "transpose")
def _transpose(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    rank = len(_shape(e, args[0]))
    a, b = (int(args[1]) % rank, int(args[2]) % rank) if len(args) > 2 else (0, 1)
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return e.emit("transpose", [args[0]], {"perm": tuple(perm)}, node.name)


@aten("expand")
def _expand(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    shape = _shape(e, args[0])
    target = [int(s) for s in args[1]]
    lead = len(target) - len(shape)
    full = tuple(shape[d - lead] if s == -1 else s for d, s in enumerate(target))
    if full == shape:
        return e.emit("identity", [args[0]], name=node.name)
    return e.emit("expand", [args[0]], {"shape": full}, node.name)


@aten("slice")
def _slice(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    shape = _shape(e, args[0])
    dim = int(args[1]) % len(shape) if len(args) > 1 else 0
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 and args[3] is not None else shape[dim]
    step = args[4] if len(args) > 4 else 1
    begin, stop = [0] * len(shape), list(shape)
    begin[dim], stop[dim] = int(start), int(min(end, shape[dim]))
    steps = [1] * len(shape)
    steps[dim] = int(step)
    if tuple(begin) == (0,) * len(shape) and tuple(stop) == shape and steps == [1] * len(shape):
        return e.emit("identity", [args[0]], name=node.name)
    return e.emit("slice", [args[0]], {"begin": tuple(begin), "end": tuple(stop), "steps": tuple(steps)}, node.name)


@aten("select")
def _select(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    shape = _shape(e, args[0])
    dim, index = int(args[1]) % len(shape), int(args[2]) % shape[int(args[1]) % len(shape)]
    begin, stop = [0] * len(shape), list(shape)
    begin[dim], stop[dim] = index, index + 1
    picked = e.emit("slice", [args[0]], {"begin": tuple(begin), "end": tuple(stop), "steps": (1,) * len(shape)})
    return e.emit("reshape", [picked], {"shape": tuple(s for d, s in enumerate(shape) if d != dim)}, node.name)


@aten("split_with_sizes", "split")
def _split(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple:
    shape = _shape(e, args[0])
    dim = int(args[2] if len(args) > 2 else kwargs.get("dim", 0)) % len(shape)
    sizes = args[1]
    if isinstance(sizes, int):
        sizes = [min(sizes, shape[dim] - i) for i in range(0, shape[dim], sizes)]
    outs, start = [], 0
    for index, size in enumerate(sizes):
        begin, stop = [0] * len(shape), list(shape)
        begin[dim], stop[dim] = start, start + size
        outs.append(e.emit("slice", [args[0]], {"begin": tuple(begin), "end": tuple(stop), "steps": (1,) * len(shape)},
                           f"{node.name}_{index}"))
        start += size
    return tuple(outs)


@aten("cat")
def _cat(e: Emitter, node: Any, args: list[Any], kwargs: dict[str, Any]) -> str:
    parts = [tensor(e, a) for a in args[0]]
    axis = int(args[1]) if len(args) > 1 else int(kwargs.get("dim", 0))
    return e.emit("concat", [p for p in parts if e.type_of(p).size > 0], {"axis": axis}, node.name)


__all__ = ["ATEN", "numpy_of"]
