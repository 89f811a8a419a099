"""ONNX operators (opsets 13 to 21) as graph ops: one converter per op type, in CONVERTERS.

A converter gets the Emitter, the ONNX node, its inputs as graph tensor names ("" for an omitted
optional input), its attributes as a dict and the opset, and returns the names of its outputs.
Inputs that shape the result (Reshape's shape, Slice's starts, ...) must be constants; the Emitter
folds shape subgraphs into constants as they are converted, so they are by the time they are read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends import onnx_qdq
from tilegraph.graph.frontends.conv3d import conv3d
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_pooling import max_pool_with_indices, pool_by_axes, pool_pads
from tilegraph.graph.ir import is_float

Converter = Callable[[Emitter, Any, list[str], dict[str, Any], int], list[str]]
CONVERTERS: dict[str, Converter] = {}

# ONNX TensorProto data types tilegraph runs, by their enum value.
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}


def converts(*op_types: str) -> Callable[[Converter], Converter]:
    def wrap(fn: Converter) -> Converter:
        for op_type in op_types:
            CONVERTERS[op_type] = fn
        return fn

    return wrap


def _out(node: Any, index: int = 0) -> str:
    return node.output[index] if index < len(node.output) else ""


def _ints(e: Emitter, name: str, what: str) -> list[int]:
    return [int(v) for v in np.asarray(e.value(name, what)).reshape(-1)]


def _rank(e: Emitter, name: str) -> int:
    return len(e.type_of(name).shape)


def dtype_of(code: int, where: str) -> str:
    if code not in ONNX_DTYPES:
        raise GraphError(f"{where}: ONNX data type {code} is not supported "
                         f"({', '.join(sorted(set(ONNX_DTYPES.values())))})")
    return ONNX_DTYPES[code]


# ---------------------------------------------------------------------------------------- elementwise
_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Erf": "erf",
          "Sqrt": "sqrt", "Abs": "abs", "Reciprocal": "reciprocal", "Neg": "neg", "IsNaN": "isnan", "Not": "not",
          "HardSwish": "hard_swish", "Identity": "identity"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "equal", "Less": "less",
           "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "and",
           "Or": "or"}


@converts(*_UNARY)
def _unary(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit(_UNARY[node.op_type], [ins[0]], name=node.name, outputs=[_out(node)])]


@converts(*_BINARY)
def _binary(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    a, b = ins
    if node.op_type == "Pow" and not is_float(e.type_of(a).dtype):  # integer powers through float64
        wide = [e.emit("cast", [t], {"to": "float64"}, f"{node.name}_f64_{i}") for i, t in enumerate((a, b))]
        power = e.emit("pow", wide, name=f"{node.name}_pow")
        return [e.emit("cast", [e.emit("round", [power], name=f"{node.name}_round")], {"to": e.type_of(a).dtype},
                       node.name, [_out(node)])]
    if node.op_type == "Pow" and e.type_of(b).dtype != e.type_of(a).dtype:
        b = e.emit("cast", [b], {"to": e.type_of(a).dtype})
    return [e.emit(_BINARY[node.op_type], [a, b], name=node.name, outputs=[_out(node)])]


@converts("Max", "Min", "Sum")
def _variadic(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    op = {"Max": "max", "Min": "min", "Sum": "add"}[node.op_type]
    acc = ins[0]
    for other in ins[1:]:
        acc = e.emit(op, [acc, other], name=node.name)
    return [acc if len(ins) > 1 else e.emit("identity", [acc], name=node.name, outputs=[_out(node)])]


@converts("Where")
def _where(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit("where", ins, name=node.name, outputs=[_out(node)])]


@converts("Dropout")
def _dropout(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Inference: the input as it is, and (when asked for) a mask keeping every element."""
    if len(ins) > 2 and ins[2] and bool(np.asarray(e.value(ins[2], "Dropout's training_mode")).reshape(-1)[0]):
        raise GraphError(f"node {node.name!r} (Dropout) is in training mode; tilegraph compiles inference graphs")
    outs = [e.emit("identity", [ins[0]], name=node.name, outputs=[_out(node)])]
    if _out(node, 1):
        outs.append(e.constant(np.ones(e.type_of(ins[0]).shape, bool), _out(node, 1)))
    return outs


@converts("Gelu")
def _gelu(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit("gelu", [ins[0]], {"approximate": attrs.get("approximate", "none")}, node.name, [_out(node)])]


@converts("HardSigmoid")
def _hard_sigmoid(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    params = {"alpha": float(attrs.get("alpha", 0.2)), "beta": float(attrs.get("beta", 0.5))}
    return [e.emit("hard_sigmoid", [ins[0]], params, node.name, [_out(node)])]


@converts("Clip")
def _clip(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """min(max(x, lo), hi): constant bounds fold into the clip op; bounds given at run time are
    tensors of max/min."""
    bounds, tensors = {}, {}
    for key, position in (("lo", 1), ("hi", 2)):
        if len(ins) > position and ins[position]:
            if ins[position] in e.constants:
                bounds[key] = np.asarray(e.constants[ins[position]]).reshape(-1)[0].item()
            else:
                tensors[key] = ins[position]
    if not tensors:
        return [e.emit("clip", [ins[0]], bounds, node.name, [_out(node)])]
    y = e.emit("clip", [ins[0]], bounds, node.name) if bounds else ins[0]
    if "lo" in tensors:
        y = e.emit("max", [y, tensors["lo"]], name=f"{node.name}_lo")
    if "hi" in tensors:
        y = e.emit("min", [y, tensors["hi"]], name=f"{node.name}_hi")
    return [e.emit("identity", [y], name=f"{node.name}_out", outputs=[_out(node)])]


@converts("Cast")
def _cast(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    to = dtype_of(int(attrs["to"]), f"node {node.name!r} (Cast)")
    return [e.emit("cast", [ins[0]], {"to": to}, node.name, [_out(node)])]


# ---------------------------------------------------------------------------------------- nn
def _spatial_pads(node: Any, attrs: dict[str, Any], in_hw: tuple[int, int], kernel: tuple[int, int],
                  strides: tuple[int, int], dilations: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from pads or auto_pad."""
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4:
            raise GraphError(f"node {node.name!r} ({node.op_type}): only 2-D windows are supported, pads {pads}")
        return pads[0], pads[1], pads[2], pads[3]
    if auto == "VALID":
        return 0, 0, 0, 0
    total = []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations):
        out = -(-size // s)
        total.append(max((out - 1) * s + (k - 1) * d + 1 - size, 0))
    small = [t // 2 for t in total]
    big = [t - t // 2 for t in total]
    begin, end = (small, big) if auto == "SAME_UPPER" else (big, small)
    return begin[0], begin[1], end[0], end[1]


def _pad_explicitly(e: Emitter, x: str, pads: tuple[int, int, int, int], value: float, name: str) -> str:
    top, left, bottom, right = pads
    return e.emit("pad", [x], {"before": (0, 0, top, left), "after": (0, 0, bottom, right), "value": value},
                  name=f"{name}_pad")


def _one_d_as_two_d(e: Emitter, node: Any, tensors: list[str], attrs: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """A 1-D window op's tensors (N, C, L) as (N, C, 1, L) and its attributes for a height of 1."""
    out = [e.emit("reshape", [t], {"shape": (*e.type_of(t).shape[:2], 1, *e.type_of(t).shape[2:])},
                  f"{node.name}_2d{index}") if t else t for index, t in enumerate(tensors)]
    two_d = dict(attrs)
    for key, fill in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        if key in attrs:
            two_d[key] = [fill, *attrs[key]]
    if "pads" in attrs:
        begin, end = attrs["pads"]
        two_d["pads"] = [0, begin, 0, end]
    return out, two_d


def _back_to_one_d(e: Emitter, node: Any, y: str) -> list[str]:
    n, c, _, length = e.type_of(y).shape
    return [e.emit("reshape", [y], {"shape": (n, c, length)}, f"{node.name}_1d", [_out(node)])]


@converts("Conv")
def _conv(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, w = ins[0], ins[1]
    if _rank(e, x) == 3:  # 1-D: a 2-D convolution of height 1
        (x, w), two_d = _one_d_as_two_d(e, node, [x, w], attrs)
        inner = type(node)()
        inner.CopyFrom(node)
        del inner.output[:]
        inner.output.append(f"{node.name}_conv2d")
        y = _conv(e, inner, [x, w, *ins[2:]], two_d, opset)[0]
        return _back_to_one_d(e, node, y)
    if _rank(e, x) == 5:  # 3-D: one 2-D convolution per depth tap
        spatial = e.type_of(x).shape[2:]
        kernel3 = tuple(e.type_of(w).shape[2:])
        strides3 = tuple(attrs.get("strides", (1, 1, 1)))
        dilations3 = tuple(attrs.get("dilations", (1, 1, 1)))
        begin, end = pool_pads(node, attrs, spatial, kernel3, strides3, dilations3)
        return [conv3d(e, x, w, ins[2] if len(ins) > 2 else "", strides3, dilations3, begin, end,
                       int(attrs.get("group", 1)), node.name or "conv3d", _out(node))]
    if _rank(e, x) != 4:
        raise GraphError(f"node {node.name!r} (Conv): only 1-D, 2-D and 3-D convolutions (3-D to 5-D inputs) are "
                         f"supported, got {e.type_of(x)}")
    kernel = tuple(e.type_of(w).shape[2:])
    strides = tuple(attrs.get("strides", (1, 1)))
    dilations = tuple(attrs.get("dilations", (1, 1)))
    pads = _spatial_pads(node, attrs, e.type_of(x).shape[2:], kernel, strides, dilations)  # asymmetric too
    inputs = [x, w] + ([ins[2]] if len(ins) > 2 and ins[2] else [])
    conv_attrs = {"layout": "NCHW", "strides": strides, "pads": pads, "dilations": dilations,
                  "groups": int(attrs.get("group", 1))}
    integer = onnx_qdq.integer_conv(e, node, inputs, conv_attrs, _out(node))  # a QDQ model's conv on its integers
    if integer is not None:
        return [integer]
    return [e.emit("conv2d", inputs, conv_attrs, node.name, [_out(node)])]


@converts("BatchNormalization")
def _batch_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    if attrs.get("training_mode", 0) or any(node.output[1:]):
        raise GraphError(f"node {node.name!r} (BatchNormalization) is in training mode; inference graphs only")
    return [e.emit("batch_norm", ins[:5], {"epsilon": float(attrs.get("epsilon", 1e-5)), "axis": 1}, node.name,
                   [_out(node)])]


@converts("MatMul")
def _matmul(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    a, b = ins
    a_shape, b_shape = e.type_of(a).shape, e.type_of(b).shape
    if len(a_shape) >= 2 and len(b_shape) >= 2:
        integer = onnx_qdq.integer_matmul(e, node, a, b, False, "", _out(node))  # a QDQ model's product
        if integer is not None:
            return [integer]
        return [e.emit("matmul", [a, b], name=node.name, outputs=[_out(node)])]
    a2 = e.emit("reshape", [a], {"shape": (1, *a_shape)}) if len(a_shape) == 1 else a
    b2 = e.emit("reshape", [b], {"shape": (*b_shape, 1)}) if len(b_shape) == 1 else b
    product = e.emit("matmul", [a2, b2], name=node.name)
    shape = list(e.type_of(product).shape)
    if len(a_shape) == 1:
        shape.pop(-2)
    if len(b_shape) == 1:
        shape.pop(-1)
    return [e.emit("reshape", [product], {"shape": tuple(shape)}, f"{node.name}_squeeze", [_out(node)])]


@converts("Gemm")
def _gemm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 and ins[2] else ""
    if not attrs.get("transA", 0) and float(attrs.get("alpha", 1.0)) == 1.0 and float(attrs.get("beta", 1.0)) == 1.0:
        integer = onnx_qdq.integer_matmul(e, node, a, b, bool(attrs.get("transB", 0)), bias, _out(node))
        if integer is not None:  # a QDQ model's product on its integers
            return [integer]
    if attrs.get("transA", 0):
        a = e.emit("transpose", [a], {"perm": (1, 0)}, f"{node.name}_ta")
    if attrs.get("transB", 0):
        b = e.emit("transpose", [b], {"perm": (1, 0)}, f"{node.name}_tb")
    y = e.emit("matmul", [a, b], name=node.name)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = e.emit("mul", [y, e.constant(np.array(alpha, np.float32), "alpha")], name=f"{node.name}_alpha")
    if len(ins) > 2 and ins[2] and beta != 0.0:
        c = ins[2]
        if beta != 1.0:
            c = e.emit("mul", [c, e.constant(np.array(beta, np.float32), "beta")], name=f"{node.name}_beta")
        y = e.emit("add", [y, c], name=f"{node.name}_bias")
    return [e.emit("identity", [y], name=f"{node.name}_out", outputs=[_out(node)])]


@converts("Softmax")
def _softmax(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit("softmax", [ins[0]], {"axis": int(attrs.get("axis", -1))}, node.name, [_out(node)])]


@converts("LayerNormalization")
def _layer_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    if any(node.output[1:]):  # Mean and InvStdDev asked for: the normalization written out
        from tilegraph.graph.frontends.onnx_nn_ops import layer_norm_with_statistics

        return layer_norm_with_statistics(e, node, ins, attrs)
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 and ins[2] else e.constant(np.zeros(e.type_of(scale).shape, e.type_of(x).dtype), "zero")
    params = {"axis": int(attrs.get("axis", -1)), "epsilon": float(attrs.get("epsilon", 1e-5))}
    return [e.emit("layer_norm", [x, scale, bias], params, node.name, [_out(node)])]


@converts("MaxPool", "AveragePool")
def _pool(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x = ins[0]
    if _rank(e, x) == 3 and not any(node.output[1:]) and tuple(attrs.get("dilations", (1,))) == (1,) \
            and is_float(e.type_of(x).dtype):  # 1-D: a 2-D pool of height 1
        (x,), two_d = _one_d_as_two_d(e, node, [x], attrs)
        inner = type(node)()
        inner.CopyFrom(node)
        del inner.output[:]
        inner.output.append(f"{node.name}_pool2d")
        return _back_to_one_d(e, node, _pool(e, inner, [x], two_d, opset)[0])
    if any(node.output[1:]):
        if node.op_type != "MaxPool" or _rank(e, x) < 3:
            raise GraphError(f"node {node.name!r} ({node.op_type}): only MaxPool of [N, C, spatial...] has Indices")
        values, indices = max_pool_with_indices(e, node, x, attrs)
        return [e.emit("identity", [values], name=f"{node.name}_values", outputs=[_out(node)]),
                e.emit("identity", [indices], name=f"{node.name}_indices", outputs=[_out(node, 1)])]
    if _rank(e, x) < 3:
        raise GraphError(f"node {node.name!r} ({node.op_type}): needs [N, C, spatial...], got {e.type_of(x)}")
    kernel = tuple(attrs["kernel_shape"])
    strides = tuple(attrs.get("strides", (1, 1)))
    unpadded_average = node.op_type == "AveragePool" and not attrs.get("count_include_pad", 0)
    if (_rank(e, x) != 4 or tuple(attrs.get("dilations", (1, 1))) != (1, 1)
            or not is_float(e.type_of(x).dtype)
            or (unpadded_average and (attrs.get("ceil_mode", 0) or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "")
                                      or len(set(attrs.get("pads", (0,)))) > 1))):
        return [pool_by_axes(e, node, x, attrs, _out(node))]  # what the 2-D pooling kernels do not cover
    pads = _spatial_pads(node, attrs, e.type_of(x).shape[2:], kernel, strides, (1, 1))
    if attrs.get("ceil_mode", 0):  # ceil: extra bottom/right padding makes the last partial window count
        hw = e.type_of(x).shape[2:]
        extra = []
        for size, p0, p1, k, s in zip(hw, pads[:2], pads[2:], kernel, strides):
            count = -(-(size + p0 + p1 - k) // s) + 1  # windows under ceil_mode
            if (count - 1) * s >= size + p0:  # ONNX drops a last window that starts in the end padding
                count -= 1
            extra.append(max((count - 1) * s + k - (size + p0 + p1), 0))
        pads = (pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1])
    is_max = node.op_type == "MaxPool"
    if pads[:2] != pads[2:] or (not is_max and attrs.get("count_include_pad", 0) and any(pads)):
        x = _pad_explicitly(e, x, pads, float("-inf") if is_max else 0.0, node.name)
        pads = (0, 0, 0, 0)
    params = {"kernel": kernel, "strides": strides, "pads": pads, "layout": "NCHW"}
    return [e.emit("max_pool2d" if is_max else "avg_pool2d", [x], params, node.name, [_out(node)])]



