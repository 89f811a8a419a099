"""Neural-network graph ops: convolution, matmul, normalisations, softmax, reductions, pooling.

    y = conv2d(x, w[, b], layout="NCHW", strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)
          NCHW: x (N, C, H, W), w (O, C/g, KH, KW)       NHWC: x (N, H, W, C), w (KH, KW, C/g, O)
          pads = (top, left, bottom, right)
    y = batch_norm(x, scale, bias, mean, var, epsilon=1e-5, axis=1)
    y = matmul(a, b)                    numpy's a @ b (rank >= 1, batch dimensions broadcast)
    y = softmax(x, axis=-1);  y = layer_norm(x, scale[, bias], axis=-1, epsilon=1e-5)   (axes axis..end)
    y = reduce_mean(x, axes=(2, 3), keepdims=1)     also reduce_sum, reduce_max, reduce_min; axes None or () reduce all
    y = max_pool2d / avg_pool2d(x, kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), layout="NCHW")
    y = global_avg_pool(x, layout="NCHW")           mean over H and W, kept as extent 1
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph import ops
from tilegraph.errors import GraphError
from tilegraph.graph.ir import Node, TensorType
from tilegraph.graph.ops.registry import OpDef, f64, normalize_axis, register, same
from tilegraph.testing import reference as ref

SPATIAL = {"NCHW": (2, 3), "NHWC": (1, 2)}


def _layout(node: Node) -> str:
    layout = node.attr("layout", "NCHW")
    if layout not in SPATIAL:
        raise GraphError(f"node {node.name!r} ({node.op}): layout must be NCHW or NHWC, got {layout!r}")
    return layout


def _symmetric(node: Node) -> tuple[int, int]:
    top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
    if (top, left) != (bottom, right):
        raise GraphError(f"node {node.name!r} ({node.op}): asymmetric pads {(top, left, bottom, right)} "
                         "(the frontend pads explicitly first)")
    return top, left


def _out_extent(size: int, kernel: int, stride: int, pad: int, dilation: int = 1, pad_after: int | None = None) -> int:
    after = pad if pad_after is None else pad_after
    return (size + pad + after - dilation * (kernel - 1) - 1) // stride + 1


def _conv_pads(node: Node) -> tuple[tuple[int, int], tuple[int, int]]:
    """A convolution's ((top, left), (bottom, right)); they may differ (TensorFlow's SAME padding of
    a stride-2 window pads one more after), the padding computed inside the kernel either way."""
    top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
    if min(top, left, bottom, right) < 0:
        raise GraphError(f"node {node.name!r} ({node.op}): negative pads {(top, left, bottom, right)}")
    return (top, left), (bottom, right)


def _wrapped_int32(exact: np.ndarray) -> np.ndarray:
    """An exact integer-valued float64 result as int32 arithmetic leaves it (wrapping past 2**31)."""
    return ((exact.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def _accumulated(node: Node, operand: TensorType, other: TensorType) -> str:
    """The result dtype of a product (conv2d, matmul): the operands' own (one dtype), or the
    `accumulate` attr: "float32" for bfloat16 operands summed in float32 (passes/gemms_read_bfloat16),
    "int32" for uint8/int8 x int8 summed exactly (frontends/onnx_qdq)."""
    accumulate = node.attr("accumulate", None)
    takes = {None: None, "float32": (("bfloat16", "float32"), ("bfloat16", "float32")),
             "int32": (("uint8", "int8"), ("int8",))}
    if accumulate not in takes:
        raise GraphError(f"node {node.name!r} ({node.op}): unknown accumulate={accumulate!r} (float32 or int32)")
    if accumulate is None:
        if operand.dtype != other.dtype:
            raise GraphError(f"node {node.name!r} ({node.op}) needs operands of one dtype, got {operand} and {other}")
        return operand.dtype
    first, second = takes[accumulate]
    if operand.dtype not in first or other.dtype not in second or (accumulate == "float32" and
                                                                    operand.dtype != other.dtype):
        raise GraphError(f"node {node.name!r} ({node.op}): accumulate={accumulate!r} takes {'/'.join(first)} x "
                         f"{'/'.join(second)} operands, got {operand.dtype} and {other.dtype}")
    return accumulate


@register("conv2d", arity=(2, 3))
class Conv2d(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, w = types[0], types[1]
        layout, groups = _layout(node), node.attr("groups", 1)
        out_dtype = _accumulated(node, x, w)
        if len(x.shape) != 4 or len(w.shape) != 4:
            raise GraphError(f"node {node.name!r} (conv2d) needs 4-D x and w, got {x} and {w}")
        n, h, wd, c = (x.shape[0], *x.shape[2:], x.shape[1]) if layout == "NCHW" else x.shape
        o, ci, kh, kw = w.shape if layout == "NCHW" else (w.shape[3], w.shape[2], w.shape[0], w.shape[1])
        if c % groups or o % groups or ci * groups != c:
            raise GraphError(f"node {node.name!r} (conv2d): x has {c} channels, w {w} with groups={groups}")
        if len(types) == 3 and types[2] is not None and types[2].shape != (o,):
            raise GraphError(f"node {node.name!r} (conv2d): bias must have shape ({o},), got {types[2]}")
        (ph, pw), (pb, pr) = _conv_pads(node)
        (sh, sw), (dh, dw) = node.attr("strides", (1, 1)), node.attr("dilations", (1, 1))
        oh, ow = _out_extent(h, kh, sh, ph, dh, pb), _out_extent(wd, kw, sw, pw, dw, pr)
        if oh <= 0 or ow <= 0:
            raise GraphError(f"node {node.name!r} (conv2d): window {kh}x{kw} does not fit input {x}")
        return [TensorType((n, o, oh, ow) if layout == "NCHW" else (n, oh, ow, o), out_dtype)]

    def reference(self, node: Node, xs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        integer = node.attr("accumulate", None) == "int32"  # exact in float64, wrapped as int32 does
        x, w = (xs[0].astype(np.float64), xs[1].astype(np.float64)) if integer else (f64(xs[0]), f64(xs[1]))
        nhwc = _layout(node) == "NHWC"
        x_nhwc = x if nhwc else x.transpose(0, 2, 3, 1)
        w_hwio = w if nhwc else w.transpose(2, 3, 1, 0)
        before, after = _conv_pads(node)
        if node.attr("pad_value", 0):  # the border reads the value (a quantized input's zero point)
            x_nhwc = np.pad(x_nhwc, ((0, 0), (before[0], after[0]), (before[1], after[1]), (0, 0)),
                            constant_values=float(node.attr("pad_value", 0)))
            before, after = (0, 0), (0, 0)
        out = ref.conv2d_nhwc(x_nhwc, w_hwio, node.attr("strides", (1, 1)), before,
                              node.attr("dilations", (1, 1)), node.attr("groups", 1), after)
        if len(xs) == 3 and xs[2] is not None:
            out = out + f64(xs[2])
        out = _wrapped_int32(out) if integer else out
        return [out if nhwc else out.transpose(0, 3, 1, 2)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        x, w = args[0], args[1]
        stride, dilation, groups = node.attr("strides", (1, 1)), node.attr("dilations", (1, 1)), node.attr("groups", 1)
        padding, after = _conv_pads(node)
        if _layout(node) == "NHWC":
            out = ops.conv2d_nhwc(x, w, stride, padding, dilation, groups, padding_after=after,
                                  accumulate=node.attr("accumulate", None), pad_value=node.attr("pad_value", 0))
            bias = args[2] if len(args) == 3 else None
            return [out if bias is None else ops.add(out, bias)]
        if node.attr("accumulate", None) or node.attr("pad_value", 0):
            raise GraphError(f"node {node.name!r} (conv2d): accumulate and pad_value need the NHWC layout")
        if groups == 1 and padding == after:
            out = ops.conv2d_nchw(x, w, stride, padding, dilation)
        else:  # grouped or asymmetric NCHW (only when the layout pass is off): transposes around the NHWC conv
            out = ops.transpose(ops.conv2d_nhwc(ops.transpose(x, (0, 2, 3, 1)), ops.transpose(w, (2, 3, 1, 0)),
                                                stride, padding, dilation, groups, padding_after=after), (0, 3, 1, 2))
        if len(args) == 3:
            out = ops.add(out, ops.reshape(args[2], (args[2].shape[0], 1, 1)))
        return [out]


@register("batch_norm", arity=(5, 5))
class BatchNorm(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        c = x.shape[normalize_axis(node.attr("axis", 1), len(x.shape), node)]
        for t in types[1:]:
            if t.shape != (c,):
                raise GraphError(f"node {node.name!r} (batch_norm): parameters must have shape ({c},), got {t}")
        return [x]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, scale, bias, mean, var = (f64(a) for a in xs)
        axis = normalize_axis(node.attr("axis", 1), x.ndim, node)
        shape = [1] * x.ndim
        shape[axis] = -1
        eps = node.attr("epsilon", 1e-5)
        return [(x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape)
                + bias.reshape(shape)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        x, scale, bias, mean, var = args
        return [ops.batch_norm(x, mean, var, scale, bias, node.attr("axis", 1), node.attr("epsilon", 1e-5))]


@register("matmul", arity=(2, 2))
class MatMul(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        a, b = types
        out_dtype = _accumulated(node, a, b)
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise GraphError(f"node {node.name!r} (matmul) needs operands of rank >= 2, got {a} and {b} "
                             "(the frontend reshapes vectors)")
        if a.shape[-1] != b.shape[-2]:
            raise GraphError(f"node {node.name!r} (matmul): {a} @ {b} disagree on K")
        batch = tuple(int(s) for s in np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        return [TensorType((*batch, a.shape[-2], b.shape[-1]), out_dtype)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if node.attr("accumulate", None) == "int32":  # exact in float64 (|sum| < 2**53), wrapped as int32 does
            return [_wrapped_int32(np.matmul(xs[0].astype(np.float64), xs[1].astype(np.float64)))]
        return [np.matmul(f64(xs[0]), f64(xs[1]))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        a, b = args
        accumulate = node.attr("accumulate", None)
        if a.ndim == 2 and b.ndim == 2:
            return [ops.matmul(a, b, accumulate=accumulate)]
        return [ops.matmul_nd(a, b, accumulate=accumulate)]


@register("softmax")
class Softmax(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        normalize_axis(node.attr("axis", -1), len(types[0].shape), node)
        return [types[0]]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [ref.softmax(xs[0], node.attr("axis", -1))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.softmax(args[0], node.attr("axis", -1))]


def _norm_axes(node: Node, ndim: int) -> tuple[int, ...]:
    return tuple(range(normalize_axis(node.attr("axis", -1), ndim, node), ndim))


@register("layer_norm", arity=(3, 3))
class LayerNorm(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        norm_shape = tuple(x.shape[a] for a in _norm_axes(node, len(x.shape)))
        for t in types[1:]:
            if t.shape != norm_shape:
                raise GraphError(f"node {node.name!r} (layer_norm): scale and bias need shape {norm_shape}, got {t}")
        return [x]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = f64(xs[0])
        axes = _norm_axes(node, x.ndim)
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        return [(x - mean) / np.sqrt(var + node.attr("epsilon", 1e-5)) * f64(xs[1]) + f64(xs[2])]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        x, scale, bias = args
        return [ops.layer_norm(x, scale, bias, _norm_axes(node, x.ndim), node.attr("epsilon", 1e-5))]


def _extreme(dtype: np.dtype, lowest: bool) -> float:
    """The lowest (or highest) value of `dtype`: max's (min's) identity over an empty set."""
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind == "b":
        return 0.0 if lowest else 1.0
    info = np.iinfo(dtype)
    return float(info.min if lowest else info.max)


class Reduce(OpDef):
    numpy_name = "sum"

    def _axes(self, node: Node, ndim: int) -> tuple[int, ...]:
        axes = node.attr("axes")
        return tuple(range(ndim)) if not axes else tuple(sorted(normalize_axis(a, ndim, node) for a in axes))

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        axes, keep = self._axes(node, len(x.shape)), node.attr("keepdims", 1)
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape) if keep or d not in axes)
        return [same(x, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = f64(xs[0])
        fn = getattr(np, self.numpy_name)
        extra = {}
        if x.size == 0 and self.numpy_name in ("max", "min"):  # over nothing: the identity (ONNX's empty set)
            extra["initial"] = _extreme(np.dtype(xs[0].dtype), lowest=self.numpy_name == "max")
        return [fn(x, axis=self._axes(node, x.ndim), keepdims=bool(node.attr("keepdims", 1)), **extra)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        x = args[0]
        fn = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min, "prod": ops.prod}[self.numpy_name]
        return [fn(x, self._axes(node, x.ndim), bool(node.attr("keepdims", 1)))]


for _name in ("sum", "mean", "max", "min", "prod"):
    register(f"reduce_{_name}")(type(f"Reduce_{_name}", (Reduce,), {"numpy_name": _name}))


class Pool(OpDef):
    kind = "max"

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        if len(x.shape) != 4:
            raise GraphError(f"node {node.name!r} ({node.op}) needs a 4-D input, got {x}")
        dims = SPATIAL[_layout(node)]
        (kh, kw), (sh, sw), (ph, pw) = node.attr("kernel"), node.attr("strides", (1, 1)), _symmetric(node)
        shape = list(x.shape)
        shape[dims[0]] = _out_extent(x.shape[dims[0]], kh, sh, ph)
        shape[dims[1]] = _out_extent(x.shape[dims[1]], kw, sw, pw)
        return [same(x, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        fn = ref.max_pool2d if self.kind == "max" else ref.avg_pool2d
        return [fn(xs[0], node.attr("kernel"), node.attr("strides", (1, 1)), _symmetric(node), _layout(node))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        fn = ops.max_pool2d if self.kind == "max" else ops.avg_pool2d
        return [fn(args[0], node.attr("kernel"), node.attr("strides", (1, 1)), _symmetric(node), _layout(node))]


register("max_pool2d")(type("MaxPool2d", (Pool,), {"kind": "max"}))
register("avg_pool2d")(type("AvgPool2d", (Pool,), {"kind": "avg"}))


@register("global_avg_pool")
class GlobalAvgPool(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        if len(x.shape) != 4:
            raise GraphError(f"node {node.name!r} (global_avg_pool) needs a 4-D input, got {x}")
        shape = list(x.shape)
        for d in SPATIAL[_layout(node)]:
            shape[d] = 1
        return [same(x, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [f64(xs[0]).mean(axis=SPATIAL[_layout(node)], keepdims=True)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.global_avg_pool2d(args[0], _layout(node))]


@register("attention", arity=(3, 4))
class Attention(OpDef):
    """softmax(q @ kt * scale + mask) @ v (ops/attention.py), made by graph/passes/fuse_attention.py:
    q (*B, S, D), kt (*B, D, T), v (*B, T, E), optional mask broadcastable to (*B, S, T)."""

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        q, kt, v = types[:3]
        if q.dtype != kt.dtype or q.dtype != v.dtype or min(len(q.shape), len(kt.shape), len(v.shape)) < 2:
            raise GraphError(f"node {node.name!r} (attention): q {q}, kt {kt} and v {v} need one dtype and rank >= 2")
        if q.shape[:-2] != kt.shape[:-2] or q.shape[:-2] != v.shape[:-2] or q.shape[-1] != kt.shape[-2] \
                or kt.shape[-1] != v.shape[-2]:
            raise GraphError(f"node {node.name!r} (attention): q {q}, kt {kt} and v {v} do not chain")
        return [same(q, (*q.shape[:-1], v.shape[-1]))]

    def reference(self, node: Node, xs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        mask = xs[3] if len(xs) > 3 else None
        return [ref.attention(xs[0], xs[1], xs[2], mask, node.attr("scale", None), node.attr("divide", False),
                              node.attr("nan_to_zero", False))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        mask = args[3] if len(args) > 3 else None
        return [ops.attention(args[0], args[1], args[2], mask, node.attr("scale", None), node.attr("divide", False),
                              node.attr("nan_to_zero", False))]
