"""Integer products from QDQ models: a Conv, MatMul or Gemm whose activation and constant weights
come out of DequantizeLinear runs on the 8-bit integers (as ONNX Runtime's QDQ selectors do),
instead of on the dequantized floats.

    x = DequantizeLinear(xq, sx, zx)         xq int8/uint8, sx and zx one scalar each
    w = DequantizeLinear(wq, sw, 0)          wq an int8 constant, sw one or one per output channel
    y = Conv(x, w, bias) | MatMul(x, w) | Gemm(x, w, bias)
==>
    u   = xq + 128 as uint8 (xq int8; the uint8 its QuantizeLinear also computes), or xq (uint8);
          zu = zx + 128 (or zx)
    acc = conv2d / matmul(u, wq) {accumulate: int32, pad_value: zu}    exact: sum u * wq
    y   = float32(acc - zu * colsum(wq)) * (sx * sw) + bias           colsum over each output channel

sum (u - zu) * wq = sum u * wq - zu * sum wq, so the centring is one int32 constant per output
channel, computed here (where the weights are packed); the border of a padded convolution reads
zu, the quantized zero. The shift to uint8 is exact (an int8 quantized with zero point z is the
uint8 quantized with z + 128) and gives the u8 x s8 products AVX512_VNNI multiplies
(lower/passes/group_int8_products.py). What does not match (per-channel activations, weights with
zero points, grouped convolutions, uint8 weights, a transposed A) keeps the dequantized floats:
slower, never wrong.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.graph.frontends.emitter import Emitter

GROUP = 4  # products summed per dot-product step (vpdpbusd): input channels are padded to it when few
# Whether a QDQ model's Conv/MatMul/Gemm take the integer kernels (None: yes; compile sets it from
# the target, target.int8_dot_lanes): without a dot-product step the int32 multiply-adds cost more
# than float32 (QDQ ResNet-50 on an AVX2 target before it had a step: 133 ms on the integers, 49
# on the dequantized floats, 42 float32); with AVX2's vpmaddwd step and weights packed in its pairs
# (a Zen 5 core as an AVX2 target, untuned: ResNet-50 40.8 ms on the integers, 48.3 on the floats,
# 43.7 float32; BERT-base 97.8 / 117.2 / 100.4). QLinear*/MatMulInteger keep them
# (their other path sums in float64).
INTEGER_PRODUCTS: ContextVar[bool | None] = ContextVar("tilegraph_integer_products", default=None)
RECORDS = "_dequantized"  # the emitter's attribute: ONNX tensor -> Dequantized
UNSIGNED = "_unsigned"  # the emitter's attribute: int8 tensor -> the same integers + 128 as uint8


@dataclass(frozen=True)
class Dequantized:
    q: str       # the integer tensor
    scale: str
    zero: str    # "" when absent
    axis: int
    block: int


def record(e: Emitter, output: str, info: Dequantized) -> None:
    if not hasattr(e, RECORDS):
        setattr(e, RECORDS, {})
    getattr(e, RECORDS)[output] = info


def record_unsigned(e: Emitter, int8: str, uint8: str) -> None:
    """`uint8` holds `int8`'s integers plus 128 (QuantizeLinear computes both)."""
    if not hasattr(e, UNSIGNED):
        setattr(e, UNSIGNED, {})
    getattr(e, UNSIGNED)[int8] = uint8


def _source(e: Emitter, name: str) -> Dequantized | None:
    return getattr(e, RECORDS, {}).get(name)


def _activation(e: Emitter, name: str) -> tuple[str, float, int] | None:
    """(quantized tensor, scale, zero point) of a per-tensor dequantized int8/uint8 activation."""
    info = _source(e, name)
    if info is None or info.block or e.type_of(info.q).dtype not in ("int8", "uint8") or info.scale not in e.constants:
        return None
    scale = e.constants[info.scale]
    zero = e.constants.get(info.zero) if info.zero else np.zeros((), e.type_of(info.q).dtype)
    if scale.size != 1 or zero is None or zero.size != 1:
        return None
    return info.q, float(scale.reshape(())), int(zero.reshape(()))


def _weights(e: Emitter, name: str, channel_axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 weights, float64 scale per output channel) of symmetric constant int8 weights,
    quantized per tensor or along `channel_axis`."""
    info = _source(e, name)
    if info is None or info.block or info.q not in e.constants or info.scale not in e.constants:
        return None
    q, scale = e.constants[info.q], e.constants[info.scale].astype(np.float64)
    if q.dtype != np.int8 or (info.zero and (info.zero not in e.constants or np.any(e.constants[info.zero]))):
        return None
    channels = q.shape[channel_axis]
    if scale.size == 1:
        return q, np.full(channels, float(scale.reshape(())))
    if scale.size != channels or info.axis % q.ndim != channel_axis % q.ndim:
        return None
    return q, scale.reshape(channels)


def _unsigned(e: Emitter, q: str, zero: int, name: str) -> tuple[str, int]:
    """The activation as uint8 and its zero point (int8 shifted by 128: exact)."""
    if e.type_of(q).dtype == "uint8":
        return q, zero
    if q in getattr(e, UNSIGNED, {}):  # quantized here: its uint8 form is at hand
        return getattr(e, UNSIGNED)[q], zero + 128
    wide = e.emit("cast", [q], {"to": "int32"}, f"{name}_i32")
    shifted = e.emit("add", [wide, e.constant(np.array(128, np.int32), f"{name}_128")], name=f"{name}_shift")
    return e.emit("cast", [shifted], {"to": "uint8"}, f"{name}_u8"), zero + 128


def _epilogue(e: Emitter, acc: str, centre: np.ndarray, scale: np.ndarray, bias: str, view: tuple[int, ...],
              name: str, output: str) -> str:
    """float32(acc - centre) * scale (+ bias), the per-channel constants shaped `view`."""
    centred = e.emit("sub", [acc, e.constant(centre.astype(np.int32).reshape(view), f"{name}_centre")],
                     name=f"{name}_centred")
    real = e.emit("cast", [centred], {"to": "float32"}, f"{name}_real")
    y = e.emit("mul", [real, e.constant(scale.astype(np.float32).reshape(view), f"{name}_scale")], name=f"{name}_scaled")
    if bias:  # one per channel, viewed like the scale; anything else broadcasts as it is (Gemm's C)
        per_channel = e.type_of(bias).size == view[0] and e.type_of(bias).shape != view
        b = e.emit("reshape", [bias], {"shape": view}, f"{name}_bias_view") if per_channel else bias
        y = e.emit("add", [y, b], name=f"{name}_biased")
    return e.emit("identity", [y], name=f"{name}_out", outputs=[output])


def integer_conv(e: Emitter, node: Any, ins: list[str], conv_attrs: dict[str, Any], output: str,
                 when: bool | None = None) -> str | None:
    """A 2-D Conv (NCHW, conv_attrs as the Conv converter made them) on the integers, or None.
    `when`: whether to (None: as INTEGER_PRODUCTS says)."""
    if not _wanted(when) or conv_attrs["groups"] != 1 or len(e.type_of(ins[0]).shape) != 4:
        return None
    x, w = _activation(e, ins[0]), _weights(e, ins[1], 0)
    bias = ins[2] if len(ins) > 2 and ins[2] else ""
    if x is None or w is None or (bias and e.type_of(bias).dtype != "float32"):
        return None
    (q, x_scale, x_zero), (weights, w_scale) = x, w
    name = node.name or "conv"
    u, zero = _unsigned(e, q, x_zero, name)
    channels = weights.shape[1]
    if channels % GROUP and channels < 4 * GROUP:
        # a few input channels (an image's 3): padded to the dot product's group of four, the weights
        # with zeros (the padded channels add nothing) and the input with its zero point
        extra = -channels % GROUP
        weights = np.concatenate([weights, np.zeros((weights.shape[0], extra, *weights.shape[2:]), np.int8)], axis=1)
        u = e.emit("pad", [u], {"before": (0, 0, 0, 0), "after": (0, extra, 0, 0), "value": float(zero)},
                   f"{name}_channels")
    attrs = {**conv_attrs, "accumulate": "int32", "pad_value": zero}
    acc = e.emit("conv2d", [u, e.constant(weights, f"{name}_wq")], attrs, f"{name}_int")
    column_sums = weights.astype(np.int64).sum(axis=(1, 2, 3))
    view = (weights.shape[0], 1, 1)
    return _epilogue(e, acc, zero * column_sums, x_scale * w_scale, bias, view, name, output)


def integer_matmul(e: Emitter, node: Any, a: str, b: str, transpose_b: bool, bias: str, output: str,
                   when: bool | None = None) -> str | None:
    """MatMul / Gemm (B constant, (K, N) or with transpose_b (N, K); or, for MatMul, B another
    dequantized activation) on the integers, or None. `when` as for integer_conv."""
    if not _wanted(when) or len(e.type_of(a).shape) < 2:
        return None
    if len(e.type_of(b).shape) >= 2 and not transpose_b and not bias and b not in e.constants \
            and _activation(e, b) is not None:
        return _activation_product(e, node, a, b, output)
    if len(e.type_of(b).shape) != 2:
        return None
    x, w = _activation(e, a), _weights(e, b, 0 if transpose_b else 1)
    if x is None or w is None or (bias and e.type_of(bias).dtype != "float32"):
        return None
    (q, x_scale, x_zero), (weights, w_scale) = x, w
    weights = np.ascontiguousarray(weights.T) if transpose_b else weights
    name = node.name or "matmul"
    u, zero = _unsigned(e, q, x_zero, name)
    acc = e.emit("matmul", [u, e.constant(weights, f"{name}_wq")], {"accumulate": "int32"}, f"{name}_int")
    column_sums = weights.astype(np.int64).sum(axis=0)
    return _epilogue(e, acc, zero * column_sums, x_scale * w_scale, bias, (weights.shape[1],), name, output)


def _activation_product(e: Emitter, node: Any, a: str, b: str, output: str) -> str | None:
    """Two dequantized activations (attention's products), batched: with B as int8 (shifted by
    128 when uint8) and both zero points,
        sum (u - zu)(s - zs) = sum u*s - zs * rowsum(u) - zu * colsum(s) + K * zu * zs
    the row and column sums reduced at run time (one pass over each operand)."""
    x, y = _activation(e, a), _activation(e, b)
    if x is None or y is None:
        return None
    (qa, a_scale, a_zero), (qb, b_scale, b_zero) = x, y
    name = node.name or "matmul"
    u, za = _unsigned(e, qa, a_zero, f"{name}_a")
    s, zb = qb, b_zero
    if e.type_of(qb).dtype == "uint8":  # the same integers - 128, as int8 (exact)
        wide = e.emit("cast", [qb], {"to": "int32"}, f"{name}_b_i32")
        s = e.emit("cast", [e.emit("sub", [wide, e.constant(np.array(128, np.int32), f"{name}_b_128")],
                                   name=f"{name}_b_shift")], {"to": "int8"}, f"{name}_b_s8")
        zb -= 128
    depth = e.type_of(u).shape[-1]
    acc = e.emit("matmul", [u, s], {"accumulate": "int32"}, f"{name}_int")

    def summed(t: str, axis: int, label: str) -> str:
        wide = e.emit("cast", [t], {"to": "int32"}, f"{name}_{label}_wide")
        return e.emit("reduce_sum", [wide], {"axes": (axis,), "keepdims": 1}, f"{name}_{label}_sum")

    def times(t: str, k: int, label: str) -> str:
        return e.emit("mul", [t, e.constant(np.array(k, np.int32), f"{name}_{label}_k")], name=f"{name}_{label}_times")

    centred = acc
    if zb:
        centred = e.emit("sub", [centred, times(summed(u, -1, "rows"), zb, "rows")], name=f"{name}_less_rows")
    if za:
        centred = e.emit("sub", [centred, times(summed(s, -2, "columns"), za, "columns")], name=f"{name}_less_columns")
    if za and zb:
        centred = e.emit("add", [centred, e.constant(np.array(depth * za * zb, np.int32), f"{name}_both")],
                         name=f"{name}_centred")
    real = e.emit("cast", [centred], {"to": "float32"}, f"{name}_real")
    y_ = e.emit("mul", [real, e.constant(np.array(a_scale * b_scale, np.float32), f"{name}_scale")], name=f"{name}_scaled")
    return e.emit("identity", [y_], name=f"{name}_out", outputs=[output])


def _wanted(when: bool | None) -> bool:
    return when if when is not None else INTEGER_PRODUCTS.get() is not False


def integer_ready(e: Emitter, x: str, w: str, channel_axis: int) -> bool:
    """Whether a product of the dequantized activation `x` and dequantized constant weights `w`
    (both recorded) runs on the integers here."""
    return _activation(e, x) is not None and _weights(e, w, channel_axis) is not None


def integer_matmul_int32(e: Emitter, name: str, a: str, a_zero: str, b: str, output: str) -> str | None:
    """MatMulInteger's exact int32 sum (a - a_zero) @ b, b a symmetric int8 constant (K, N), a
    int8/uint8 with a scalar zero point, a constant or computed at run time (DynamicQuantizeLinear's),
    on the u8 x s8 kernels; None when it does not fit."""
    if b not in e.constants or e.constants[b].dtype != np.int8 or e.constants[b].ndim != 2 \
            or e.type_of(a).dtype not in ("int8", "uint8") or len(e.type_of(a).shape) < 2 \
            or (a_zero and e.type_of(a_zero).size != 1):
        return None
    weights = e.constants[b]
    column_sums = weights.astype(np.int64).sum(axis=0).astype(np.int32)
    if e.type_of(a).dtype == "int8":
        u, shift = _unsigned(e, a, 0, name)
    else:
        u, shift = a, 0
    acc = e.emit("matmul", [u, e.constant(weights, f"{name}_wq")], {"accumulate": "int32"}, f"{name}_int")
    if not a_zero and not shift:
        return e.emit("identity", [acc], name=f"{name}_out", outputs=[output])
    if not a_zero or a_zero in e.constants:
        zero = (int(e.constants[a_zero].reshape(())) if a_zero else 0) + shift
        centre = e.constant((column_sums.astype(np.int64) * zero).astype(np.int32), f"{name}_centre")
    else:  # the zero point is computed at run time: zero * column sums, one vector per call
        zero = e.emit("cast", [e.emit("reshape", [a_zero], {"shape": ()}, f"{name}_zero_scalar")], {"to": "int32"},
                      f"{name}_zero_i32")
        if shift:
            zero = e.emit("add", [zero, e.constant(np.array(shift, np.int32), f"{name}_zero_shift")],
                          name=f"{name}_zero_u8")
        centre = e.emit("mul", [zero, e.constant(column_sums, f"{name}_colsum")], name=f"{name}_centre")
    centred = e.emit("sub", [acc, centre], name=f"{name}_centred")
    return e.emit("identity", [centred], name=f"{name}_out", outputs=[output])


__all__ = ["INTEGER_PRODUCTS", "Dequantized", "record", "integer_conv", "integer_matmul", "integer_matmul_int32", "integer_ready"]
