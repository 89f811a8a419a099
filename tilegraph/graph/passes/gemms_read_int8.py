"""gemms_read_int8: dynamic int8 quantization of a float32 model's products with constant weights
(matmul, conv2d NHWC): the weights become int8 once, at compile time (symmetric, one scale per
output channel), the activation is quantized at run time from its own range (one scale per call),
the product sums u8 x s8 in int32 (the VNNI kernels of QDQ models), and the result is scaled back
to float32. `tg.compile(model, precision="int8")` runs it after the default pipeline, behind the
accuracy gate (graph/precision.py). What ONNX Runtime's quantize_dynamic and PyTorch's
quantize_dynamic do, written with graph ops:

before:   y = matmul(x, W)                                W a float32 constant (K, N)
after:    Wq, sw = round(W / sw) in [-127, 127] as int8, sw = max|W[:, n]| / 127       (compile time)
          hi, lo = max(max(x), 0), min(min(x), 0);  s = (hi - lo) / 255;  z = round(-lo / s)
          u  = uint8(clip(round(x / s) + z, 0, 255))                  (DynamicQuantizeLinear)
          y  = float32(matmul(u, Wq) {accumulate: int32} - z * colsum(Wq)) * (s * sw)

before:   y = conv2d(x, W[, b]) {layout: NHWC}                     W a float32 constant (KH, KW, C, O)
after:    s = max(max|x|) / 127;  u = uint8(clip(round(x / s), -127, 127) + 128)  (symmetric: the
          zero point is the constant 128, which the padded border reads: pad_value 128)
          y  = float32(conv2d(u, Wq) {accumulate: int32, pad_value: 128} - 128 * colsum(Wq)) * (s * sw) [+ b]

sum (u - z) * wq = sum u * wq - z * sum wq, so the centring is the weights' column sums times the
zero point (a constant for convolutions, one vector per call for matmuls). A product whose
activation is a constant, whose weights are not a 2-D (matmul) or NHWC ungrouped (conv2d) float32
constant, or that already accumulates otherwise is left alone; so are attention's products of two
activations. Legal everywhere: only the operands' precision changes (the gate judges by how much).
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

GROUP = 4   # input channels a VNNI step sums: a convolution with fewer is padded to it (zeros in W)
TINY = np.float32(np.finfo(np.float32).tiny)  # an all-zero activation gets this scale, not 0 / 0


def _weights(graph: Graph, node: Node) -> np.ndarray | None:
    """The product's constant float32 weights, or None when it is not one gemms_read_int8 takes."""
    if node.attr("accumulate", None) is not None or len(node.inputs) < 2:
        return None
    x, w = node.inputs[0], node.inputs[1]
    if x in graph.constants or graph.values[x].dtype != "float32" or w not in graph.constants:
        return None
    weights = np.asarray(graph.constants[w])
    if weights.dtype != np.float32 or not np.all(np.isfinite(weights)):
        return None
    if node.op == "matmul":
        return weights if weights.ndim == 2 and len(graph.values[x].shape) >= 2 else None
    if node.op == "conv2d" and node.attr("layout", "NCHW") == "NHWC" and node.attr("groups", 1) == 1:
        bias = node.inputs[2] if len(node.inputs) > 2 else ""
        return weights if weights.ndim == 4 and (not bias or graph.values[bias].dtype == "float32") else None
    return None


def quantize_weights(weights: np.ndarray, channel_axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weights, float32 scale per output channel): symmetric, round half to even, [-127, 127]."""
    other = tuple(a for a in range(weights.ndim) if a != channel_axis % weights.ndim)
    peak = np.max(np.abs(weights.astype(np.float64)), axis=other, keepdims=True)
    scale = np.where(peak > 0, peak / 127.0, 1.0)
    q = np.clip(np.rint(weights / scale), -127, 127).astype(np.int8)
    return q, scale.reshape(-1).astype(np.float32)


def _scalar(b: GraphBuilder, value: float | int, dtype: str, name: str) -> str:
    return b.constant(np.array(value, dtype), name)


def _reduce_all(b: GraphBuilder, op: str, x: str, name: str) -> str:
    """`op` over every element of x, in two steps: each row (the contiguous last axis, as softmax
    reduces) to one value, then those. One reduction straight to a scalar has no spatial axis to
    split across threads, and reducing the leading axes first reads them strided (0.55 ms for a
    BERT-base FFN input of 128 x 3072, in the in-situ profile)."""
    if len(b.type_of(x).shape) > 1:
        x = b.add(op, [x], {"axes": (-1,), "keepdims": 0}, f"{name}_rows")
    return b.add(op, [x], {"axes": None, "keepdims": 0}, name)


def _asymmetric(b: GraphBuilder, x: str, name: str) -> tuple[str, str, str]:
    """(uint8 activation, float32 scale, int32 zero point): DynamicQuantizeLinear's rule."""
    zero = _scalar(b, 0.0, "float32", f"{name}_0")
    hi = b.add("max", [_reduce_all(b, "reduce_max", x, f"{name}_max"), zero], name=f"{name}_hi")
    lo = b.add("min", [_reduce_all(b, "reduce_min", x, f"{name}_min"), zero], name=f"{name}_lo")
    span = b.add("div", [b.add("sub", [hi, lo], name=f"{name}_span"), _scalar(b, 255.0, "float32", f"{name}_255")],
                 name=f"{name}_step")
    scale = b.add("max", [span, _scalar(b, TINY, "float32", f"{name}_tiny")], name=f"{name}_scale")
    point = b.add("clip", [b.add("round", [b.add("div", [b.add("neg", [lo], name=f"{name}_nlo"), scale],
                                                  name=f"{name}_zdiv")], name=f"{name}_zround")],
                  {"lo": 0.0, "hi": 255.0}, f"{name}_zclip")
    q = b.add("add", [b.add("round", [b.add("div", [x, scale], name=f"{name}_div")], name=f"{name}_round"), point],
              name=f"{name}_shift")
    u = b.add("cast", [b.add("clip", [q], {"lo": 0.0, "hi": 255.0}, f"{name}_sat")], {"to": "uint8"}, f"{name}_u8")
    return u, scale, b.add("cast", [point], {"to": "int32"}, f"{name}_zero")


def _symmetric(b: GraphBuilder, x: str, name: str) -> tuple[str, str]:
    """(uint8 activation with zero point 128, float32 scale)."""
    peak = _reduce_all(b, "reduce_max", b.add("abs", [x], name=f"{name}_abs"), f"{name}_peak")
    step = b.add("div", [peak, _scalar(b, 127.0, "float32", f"{name}_127")], name=f"{name}_step")
    scale = b.add("max", [step, _scalar(b, TINY, "float32", f"{name}_tiny")], name=f"{name}_scale")
    q = b.add("clip", [b.add("round", [b.add("div", [x, scale], name=f"{name}_div")], name=f"{name}_round")],
              {"lo": -127.0, "hi": 127.0}, f"{name}_sat")
    shifted = b.add("add", [q, _scalar(b, 128.0, "float32", f"{name}_128")], name=f"{name}_shift")
    return b.add("cast", [shifted], {"to": "uint8"}, f"{name}_u8"), scale


def _rescaled(b: GraphBuilder, centred: str, scale: str, w_scale: np.ndarray, name: str) -> str:
    real = b.add("cast", [centred], {"to": "float32"}, f"{name}_real")
    both = b.add("mul", [scale, b.constant(w_scale, f"{name}_wscale")], name=f"{name}_scales")
    return b.add("mul", [real, both], name=f"{name}_scaled")


def _matmul(b: GraphBuilder, node: Node, x: str, weights: np.ndarray, quantized: dict) -> str:
    name = node.name
    wq, w_scale = quantize_weights(weights, 1)
    if (x, "asymmetric") not in quantized:  # an activation several products read is quantized once
        quantized[x, "asymmetric"] = _asymmetric(b, x, f"{name}_q")
    u, scale, zero = quantized[x, "asymmetric"]
    acc = b.add("matmul", [u, b.constant(wq, f"{name}_wq")], {"accumulate": "int32"}, f"{name}_int")
    column_sums = wq.astype(np.int64).sum(axis=0).astype(np.int32)
    centre = b.add("mul", [zero, b.constant(column_sums, f"{name}_colsum")], name=f"{name}_centre")
    centred = b.add("sub", [acc, centre], name=f"{name}_centred")
    return _rescaled(b, centred, scale, w_scale, name)


def _conv(b: GraphBuilder, node: Node, x: str, bias: str, weights: np.ndarray, quantized: dict) -> str:
    name = node.name
    wq, w_scale = quantize_weights(weights, 3)
    if (x, "symmetric") not in quantized:
        quantized[x, "symmetric"] = _symmetric(b, x, f"{name}_q")
    u, scale = quantized[x, "symmetric"]
    channels = wq.shape[2]
    if channels % GROUP and channels < 4 * GROUP:  # an image's 3 channels: padded to the group of four
        extra = -channels % GROUP
        wq = np.concatenate([wq, np.zeros((*wq.shape[:2], extra, wq.shape[3]), np.int8)], axis=2)
        u = b.add("pad", [u], {"before": (0, 0, 0, 0), "after": (0, 0, 0, extra), "value": 128.0}, f"{name}_channels")
    attrs = {**node.attr_dict, "accumulate": "int32", "pad_value": 128}
    acc = b.add("conv2d", [u, b.constant(wq, f"{name}_wq")], attrs, f"{name}_int")
    centre = (128 * wq.astype(np.int64).sum(axis=(0, 1, 2))).astype(np.int32)
    centred = b.add("sub", [acc, b.constant(centre, f"{name}_centre")], name=f"{name}_centred")
    y = _rescaled(b, centred, scale, w_scale, name)
    return b.add("add", [y, bias], name=f"{name}_biased") if bias else y


def gemms_read_int8(graph: Graph, fired: list[str] | None = None) -> Graph:
    if not any(_weights(graph, node) is not None for node in graph.nodes):
        return graph
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    quantized: dict = {}  # (activation, scheme) -> its quantized form
    for node in graph.nodes:
        weights = _weights(graph, node)
        if weights is None:
            b.copy(node, graph, rename)
            continue
        x = rename.get(node.inputs[0], node.inputs[0])
        if node.op == "matmul":
            y = _matmul(b, node, x, weights, quantized)
        else:
            bias = rename.get(node.inputs[2], node.inputs[2]) if len(node.inputs) > 2 else ""
            y = _conv(b, node, x, bias, weights, quantized)
        rename[node.outputs[0]] = y
        if fired is not None:
            fired.append(f"gemms_read_int8: {node.name} ({node.op})")
    return b.build_renamed(graph.outputs, rename)


__all__ = ["gemms_read_int8", "quantize_weights"]
