"""ONNX's quantization operators written with graph ops (registered into onnx_ops.CONVERTERS), for
correct int8/uint8/int16/uint16 models (fast int8 kernels are the low-precision issue's):

    DequantizeLinear(x, s, z)   (float(x) - float(z)) * s               per tensor, per axis or per block
    QuantizeLinear(x, s, z)     saturate(round_half_even(x / s) + z)
    DynamicQuantizeLinear(x)    uint8 with s, z from x's range (including 0)
    QLinearMatMul, MatMulInteger, QLinearConv, ConvInteger
                                on the u8 x s8 int32 kernels where onnx_qdq takes them (per-tensor
                                activations, symmetric int8 constant weights: QLinear* read as
                                DequantizeLinear -> product -> QuantizeLinear, MatMulInteger's
                                run-time zero point (DynamicQuantizeLinear's) included); else the
                                integer products summed exactly in float64, then requantized
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends import onnx_qdq
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _out, converts, dtype_of
from tilegraph.graph.frontends.onnx_qdq import Dequantized, record, record_unsigned

QUANTIZED = ("int8", "uint8", "int16", "uint16", "int32")


def _along(e: Emitter, v: str, x: str, axis: int, block: int, name: str) -> str:
    """A scale or zero point shaped to broadcast against x: a scalar as it is, a vector along
    `axis`, a blocked tensor repeated `block` times along `axis`."""
    shape, v_shape = e.type_of(x).shape, e.type_of(v).shape
    if e.type_of(v).size == 1 and not block:
        return e.emit("reshape", [v], {"shape": ()}, f"{name}_scalar")
    axis %= len(shape)
    if block:
        index = np.minimum(np.arange(shape[axis]) // block, v_shape[axis] - 1).astype(np.int64)
        return e.emit("gather", [v, e.constant(index, f"{name}_blocks")], {"axis": axis}, f"{name}_blocked")
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return e.emit("reshape", [v], {"shape": tuple(view)}, f"{name}_axis")


def dequantize(e: Emitter, x: str, scale: str, zero: str, axis: int, block: int, dtype: str, name: str) -> str:
    wide = e.emit("cast", [x], {"to": "float32" if dtype != "float64" else dtype}, f"{name}_wide")
    if zero:
        zero_wide = e.emit("cast", [_along(e, zero, x, axis, block, f"{name}_z")], {"to": e.type_of(wide).dtype},
                           f"{name}_z_wide")
        wide = e.emit("sub", [wide, zero_wide], name=f"{name}_centred")
    s = _along(e, scale, x, axis, block, f"{name}_s")
    if e.type_of(s).dtype != e.type_of(wide).dtype:
        s = e.emit("cast", [s], {"to": e.type_of(wide).dtype}, f"{name}_s_wide")
    y = e.emit("mul", [wide, s], name=f"{name}_scaled")
    return y if e.type_of(y).dtype == dtype else e.emit("cast", [y], {"to": dtype}, f"{name}_out_dtype")


def quantize(e: Emitter, x: str, scale: str, zero: str, axis: int, block: int, dtype: str, name: str) -> str:
    if dtype not in QUANTIZED[:-1]:
        raise GraphError(f"{name}: quantizing to {dtype} is not supported ({', '.join(QUANTIZED[:-1])})")
    wide = x if e.type_of(x).dtype in ("float32", "float64") else e.emit("cast", [x], {"to": "float32"}, f"{name}_wide")
    work = e.type_of(wide).dtype
    s = _along(e, scale, x, axis, block, f"{name}_s")
    if e.type_of(s).dtype != work:
        s = e.emit("cast", [s], {"to": work}, f"{name}_s_wide")
    q = e.emit("round", [e.emit("div", [wide, s], name=f"{name}_div")], name=f"{name}_round")
    if zero:
        z = e.emit("cast", [_along(e, zero, x, axis, block, f"{name}_z")], {"to": work}, f"{name}_z_wide")
        q = e.emit("add", [q, z], name=f"{name}_shifted")
    info = np.iinfo(dtype)
    q = e.emit("clip", [q], {"lo": float(info.min), "hi": float(info.max)}, f"{name}_saturate")
    return e.emit("cast", [q], {"to": dtype}, f"{name}_cast")


def _input(ins: list[str], index: int) -> str:
    return ins[index] if len(ins) > index else ""


@converts("DequantizeLinear")
def _dequantize_linear(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, scale, zero = ins[0], ins[1], _input(ins, 2)
    if e.type_of(x).dtype not in QUANTIZED:
        raise GraphError(f"node {node.name!r} (DequantizeLinear): {e.type_of(x).dtype} input is not supported")
    dtype = dtype_of(int(attrs["output_dtype"]), f"node {node.name!r}") if attrs.get("output_dtype") else \
        e.type_of(scale).dtype
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0))
    y = dequantize(e, x, scale, zero, axis, block, dtype, node.name)
    if dtype == "float32":  # a product reading it may run on the integers instead (onnx_qdq.py)
        record(e, _out(node), Dequantized(x, scale, zero, axis, block))
    return [e.emit("identity", [y], name=f"{node.name}_out", outputs=[_out(node)])]


@converts("QuantizeLinear")
def _quantize_linear(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, scale, zero = ins[0], ins[1], _input(ins, 2)
    if attrs.get("output_dtype"):
        dtype = dtype_of(int(attrs["output_dtype"]), f"node {node.name!r}")
    else:
        dtype = e.type_of(zero).dtype if zero else "uint8"
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0))
    if dtype == "int8" and not block and (not zero or (zero in e.constants and e.type_of(zero).size == 1)):
        # also as uint8 (zero point + 128: the same integers shifted, exactly), which products on
        # the integers read directly (onnx_qdq.py); the int8 result is that, shifted back
        shifted_zero = (e.constants[zero].astype(np.int32) if zero else np.zeros((), np.int32)) + 128
        u = quantize(e, x, scale, e.constant(shifted_zero.astype(np.uint8), f"{node.name}_zero_u8"), axis, block,
                     "uint8", f"{node.name}_u8")
        wide = e.emit("cast", [u], {"to": "int32"}, f"{node.name}_u8_wide")
        back = e.emit("sub", [wide, e.constant(np.array(128, np.int32), f"{node.name}_128")], name=f"{node.name}_back")
        y = e.emit("cast", [back], {"to": "int8"}, f"{node.name}_int8")
        record_unsigned(e, _out(node), u)
    else:
        y = quantize(e, x, scale, zero, axis, block, dtype, node.name)
    return [e.emit("identity", [y], name=f"{node.name}_out", outputs=[_out(node)])]


@converts("DynamicQuantizeLinear")
def _dynamic_quantize(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    zero = e.constant(np.array(0.0, np.float32), f"{name}_zero")
    high = e.emit("max", [e.emit("reduce_max", [x], {"axes": None, "keepdims": 0}, f"{name}_max"), zero], name=f"{name}_hi")
    low = e.emit("min", [e.emit("reduce_min", [x], {"axes": None, "keepdims": 0}, f"{name}_min"), zero], name=f"{name}_lo")
    scale = e.emit("div", [e.emit("sub", [high, low], name=f"{name}_range"),
                           e.constant(np.array(255.0, np.float32), f"{name}_levels")], name=f"{name}_scale")
    point = e.emit("clip", [e.emit("round", [e.emit("div", [e.emit("neg", [low], name=f"{name}_nlo"), scale],
                                                     name=f"{name}_zdiv")], name=f"{name}_zround")],
                   {"lo": 0.0, "hi": 255.0}, f"{name}_zclip")
    point = e.emit("cast", [point], {"to": "uint8"}, f"{name}_zero_point")
    y = quantize(e, x, scale, point, 1, 0, "uint8", name)
    outs = [e.emit("identity", [y], name=f"{name}_y", outputs=[_out(node)])]
    for index, value in ((1, scale), (2, point)):
        outs.append(e.emit("identity", [value], name=f"{name}_o{index}", outputs=[_out(node, index)])
                    if _out(node, index) else "")
    return outs


def _integer_product(e: Emitter, a: str, a_zero: str, b: str, b_zero: str, name: str) -> str:
    """(a - a_zero) @ (b - b_zero) in float64 (exact: integer products well below 2**53)."""
    terms = []
    for side, (t, z, axis) in enumerate(((a, a_zero, -2), (b, b_zero, -1))):
        wide = e.emit("cast", [t], {"to": "float64"}, f"{name}_w{side}")
        if z:
            zw = e.emit("cast", [z], {"to": "float64"}, f"{name}_z{side}")
            if e.type_of(zw).size > 1:  # per row of a (its axis -2), per column of b (its last axis)
                view = [1] * len(e.type_of(wide).shape)
                view[axis] = e.type_of(zw).size
                zw = e.emit("reshape", [zw], {"shape": tuple(view)}, f"{name}_zv{side}")
            else:
                zw = e.emit("reshape", [zw], {"shape": ()}, f"{name}_zs{side}")
            wide = e.emit("sub", [wide, zw], name=f"{name}_c{side}")
        terms.append(wide)
    return e.emit("matmul", terms, name=f"{name}_product")


def _recorded(e: Emitter, q: str, scale: str, zero: str, axis: int, label: str) -> str:
    """DequantizeLinear(q, scale, zero) as a QDQ model writes it, recorded: a QOperator node
    (QLinearConv, QLinearMatMul) becomes DequantizeLinear -> Conv/MatMul -> QuantizeLinear, whose
    product runs on the integers where onnx_qdq can (left unused, it is dead code)."""
    y = dequantize(e, q, scale, zero, axis, 0, "float32", label)
    out = e.emit("identity", [y], name=f"{label}_dq")
    record(e, out, Dequantized(q, scale, zero, axis, 0))
    return out


def _zero_free(e: Emitter, zero: str) -> bool:
    return not zero or (zero in e.constants and not np.any(e.constants[zero]))


@converts("MatMulInteger")
def _matmul_integer(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    if _zero_free(e, _input(ins, 3)):  # symmetric int8 weights: the u8 x s8 kernels
        fast = onnx_qdq.integer_matmul_int32(e, node.name or "matmul_integer", ins[0], _input(ins, 2), ins[1],
                                             _out(node))
        if fast is not None:
            return [fast]
    product = _integer_product(e, ins[0], _input(ins, 2), ins[1], _input(ins, 3), node.name)
    return [e.emit("cast", [product], {"to": "int32"}, node.name, [_out(node)])]


@converts("QLinearMatMul")
def _qlinear_matmul(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = ins[:8]
    name = node.name or "qlinear_matmul"
    columns = e.type_of(b).shape[-1]
    if all(e.type_of(t).size == 1 for t in (y_zero, a_scale, *([a_zero] if a_zero else []))) \
            and all(e.type_of(t).size in (1, columns) for t in (b_scale, *([b_zero] if b_zero else []))):
        # as DequantizeLinear -> MatMul -> QuantizeLinear, on the integers
        a_dq = _recorded(e, a, a_scale, a_zero, -1, f"{name}_a")
        b_dq = _recorded(e, b, b_scale, b_zero, -1, f"{name}_b")
        real = onnx_qdq.integer_matmul(e, node, a_dq, b_dq, False, "", f"{name}_real", when=True)
        if real is not None:
            y = quantize(e, real, y_scale, y_zero, 1, 0, e.type_of(y_zero).dtype, name)
            return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]
    product = _integer_product(e, a, a_zero, b, b_zero, name)
    scales = [e.emit("cast", [s], {"to": "float64"}, f"{name}_s{i}") for i, s in enumerate((a_scale, b_scale, y_scale))]
    scales = [e.emit("reshape", [s], {"shape": ()}, f"{name}_sv{i}") if e.type_of(s).size == 1 else s
              for i, s in enumerate(scales)]
    factor = e.emit("div", [e.emit("mul", scales[:2], name=f"{name}_ab"), scales[2]], name=f"{name}_factor")
    real = e.emit("mul", [product, factor], name=f"{name}_real")
    ones = e.constant(np.array(1.0, np.float64), f"{name}_one")
    y = quantize(e, real, ones, y_zero, 1, 0, e.type_of(y_zero).dtype, name)
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


def _integer_conv(e: Emitter, node: Any, x: str, x_zero: str, w: str, w_zero: str, attrs: dict[str, Any],
                  opset: int, name: str) -> str:
    """conv(x - x_zero, w - w_zero) in float64 (exact, as _integer_product), through the Conv
    converter (its padding, strides, groups and 1-D handling); w_zero per output channel or one."""

    terms = []
    for side, (t, z) in enumerate(((x, x_zero), (w, w_zero))):
        wide = e.emit("cast", [t], {"to": "float64"}, f"{name}_w{side}")
        if z:
            zw = e.emit("cast", [z], {"to": "float64"}, f"{name}_z{side}")
            rank = len(e.type_of(wide).shape)
            view = (e.type_of(zw).size,) + (1,) * (rank - 1) if e.type_of(zw).size > 1 else ()
            zw = e.emit("reshape", [zw], {"shape": view}, f"{name}_zv{side}")
            wide = e.emit("sub", [wide, zw], name=f"{name}_c{side}")
        terms.append(wide)
    return _as_conv(e, node, terms, attrs, opset, f"{name}_conv")


def _as_conv(e: Emitter, node: Any, inputs: list[str], attrs: dict[str, Any], opset: int, output: str) -> str:
    """`inputs` through the Conv converter (its padding, strides, groups and 1-D handling), with
    the Conv attributes of the integer or QLinear node `node`."""
    from tilegraph.graph.frontends.onnx_ops import CONVERTERS

    inner = type(node)()
    inner.CopyFrom(node)
    inner.op_type = "Conv"
    del inner.output[:]
    inner.output.append(output)
    conv_attrs = {k: v for k, v in attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                          "strides")}
    return CONVERTERS["Conv"](e, inner, inputs, conv_attrs, opset)[0]


@converts("ConvInteger")
def _conv_integer(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    y = _integer_conv(e, node, ins[0], _input(ins, 2), ins[1], _input(ins, 3), attrs, opset, node.name or "conv_int")
    return [e.emit("cast", [y], {"to": "int32"}, node.name, [_out(node)])]


@converts("QLinearConv")
def _qlinear_conv(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """saturate(round((conv of the centred integers + bias) * x_scale * w_scale / y_scale) + y_zero)."""
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = ins[:8]
    name = node.name or "qlinear_conv"
    fast = _qlinear_conv_on_integers(e, node, ins, attrs, opset, name)
    if fast is not None:
        return [fast]
    y = _integer_conv(e, node, x, x_zero, w, w_zero, attrs, opset, name)
    rank = len(e.type_of(y).shape)
    if len(ins) > 8 and ins[8]:
        bias = e.emit("reshape", [e.emit("cast", [ins[8]], {"to": "float64"}, f"{name}_bias64")],
                      {"shape": (1, e.type_of(ins[8]).size) + (1,) * (rank - 2)}, f"{name}_bias")
        y = e.emit("add", [y, bias], name=f"{name}_biased")
    scales = []
    for i, s in enumerate((x_scale, w_scale, y_scale)):
        s = e.emit("cast", [s], {"to": "float64"}, f"{name}_s{i}")
        view = (1, e.type_of(s).size) + (1,) * (rank - 2) if e.type_of(s).size > 1 else ()
        scales.append(e.emit("reshape", [s], {"shape": view}, f"{name}_sv{i}"))
    factor = e.emit("div", [e.emit("mul", scales[:2], name=f"{name}_xw"), scales[2]], name=f"{name}_factor")
    real = e.emit("mul", [y, factor], name=f"{name}_real")
    ones = e.constant(np.array(1.0, np.float64), f"{name}_one")
    out = quantize(e, real, ones, y_zero, 1, 0, e.type_of(y_zero).dtype, name)
    return [e.emit("identity", [out], name=f"{name}_out", outputs=[_out(node)])]


def _qlinear_conv_on_integers(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int,
                              name: str) -> str | None:
    """QLinearConv as DequantizeLinear -> Conv -> QuantizeLinear where the Conv runs on the u8 x s8
    kernels (a 2-D convolution, one group, per-tensor activations, symmetric int8 weights, a
    constant bias), else None. The int32 bias is the float bias * x_scale * w_scale."""

    x, x_scale, _, w, w_scale, _, y_scale, y_zero = ins[:8]
    bias = _input(ins, 8)
    if len(e.type_of(x).shape) != 4 or int(attrs.get("group", 1)) != 1 or e.type_of(y_zero).size != 1 \
            or (bias and bias not in e.constants) or x_scale not in e.constants or w_scale not in e.constants:
        return None
    x_dq = _recorded(e, x, x_scale, ins[2], 1, f"{name}_x")
    w_dq = _recorded(e, w, w_scale, ins[5], 0, f"{name}_w")
    if not onnx_qdq.integer_ready(e, x_dq, w_dq, 0):
        return None
    inputs = [x_dq, w_dq]
    if bias:
        channels = e.type_of(w).shape[0]
        per_channel = np.broadcast_to(e.constants[w_scale].astype(np.float64).reshape(-1), (channels,))
        real = e.constants[bias].astype(np.float64) * float(e.constants[x_scale].reshape(-1)[0]) * per_channel
        inputs.append(e.constant(real.astype(np.float32), f"{name}_bias_real"))
    token = onnx_qdq.INTEGER_PRODUCTS.set(True)  # the float64 path is the other way: slower still
    try:
        y = _as_conv(e, node, inputs, attrs, opset, f"{name}_real")
    finally:
        onnx_qdq.INTEGER_PRODUCTS.reset(token)
    q = quantize(e, y, y_scale, y_zero, 1, 0, e.type_of(y_zero).dtype, name)
    return e.emit("identity", [q], name=f"{name}_out", outputs=[_out(node)])

