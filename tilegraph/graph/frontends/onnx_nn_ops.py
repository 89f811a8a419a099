"""ONNX normalizations, global pools and layout ops written with existing graph ops (registered
into onnx_ops.CONVERTERS).

    RMSNormalization(x)          x / sqrt(mean(x * x) + eps) * scale
    InstanceNormalization(x)     per (n, c): (x - mean) / sqrt(var + eps) * scale[c] + bias[c]
    GroupNormalization(x)        the same over (channels of a group, spatial)
    LayerNormalization           with its Mean and InvStdDev outputs when they are asked for
    Tile(x, repeats)             reshape (1, d) per axis, expand (r, d), reshape (r * d)
    DepthToSpace, SpaceToDepth   reshape, transpose, reshape
    LRN(x)                       x / (bias + alpha / size * window sum over channels of x^2)^beta
    ReverseSequence(x, lens)     gather_elements along time with index where(t < len, len - 1 - t, t)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.conv3d import conv3d
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _ints, _out, _rank, converts
from tilegraph.graph.ir import is_float


def _scalar(e: Emitter, value: float, like: str, name: str) -> str:
    return e.constant(np.array(value, dtype=e.type_of(like).dtype), name)


def _reduce(e: Emitter, op: str, x: str, axes: list[int], name: str) -> str:
    return e.emit(op, [x], {"axes": tuple(axes), "keepdims": 1}, name)


def _inv_std(e: Emitter, centred: str, axes: list[int], epsilon: float, name: str) -> str:
    """1 / sqrt(mean(centred^2) + epsilon), reduced axes kept."""
    variance = _reduce(e, "reduce_mean", e.emit("mul", [centred, centred], name=f"{name}_sq"), axes, f"{name}_var")
    shifted = e.emit("add", [variance, _scalar(e, epsilon, centred, f"{name}_eps")], name=f"{name}_var_eps")
    return e.emit("reciprocal", [e.emit("sqrt", [shifted], name=f"{name}_std")], name=f"{name}_inv_std")


def _stash(e: Emitter, x: str, attrs: dict[str, Any], name: str) -> tuple[str, str]:
    """x in the stash type (float32 unless stash_type says otherwise, as ONNX computes norms), and
    the dtype to cast the result back to."""
    dtype = e.type_of(x).dtype
    if not is_float(dtype):
        raise GraphError(f"node {name!r}: normalization needs a float input, got {e.type_of(x)}")
    if int(attrs.get("stash_type", 1)) == 1 and dtype != "float32":
        return e.emit("cast", [x], {"to": "float32"}, f"{name}_stash"), dtype
    return x, dtype


def _unstash(e: Emitter, y: str, dtype: str, name: str) -> str:
    return y if e.type_of(y).dtype == dtype else e.emit("cast", [y], {"to": dtype}, f"{name}_unstash")


def _channel_view(e: Emitter, v: str, rank: int, name: str) -> str:
    """A per-channel (C,) vector shaped (C, 1, ..., 1) to broadcast against (N, C, spatial...)."""
    return e.emit("reshape", [v], {"shape": (e.type_of(v).size,) + (1,) * (rank - 2)}, name)


@converts("RMSNormalization")
def _rms_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    name = node.name
    x, dtype = _stash(e, ins[0], attrs, name)
    rank = _rank(e, x)
    axis = int(attrs.get("axis", -1)) % rank
    inv = _inv_std(e, x, list(range(axis, rank)), float(attrs.get("epsilon", 1e-5)), name)
    y = _unstash(e, e.emit("mul", [x, inv], name=f"{name}_normed"), dtype, name)
    y = e.emit("mul", [y, ins[1]], name=f"{name}_scaled")
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


def layer_norm_with_statistics(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any]) -> list[str]:
    """LayerNormalization's three outputs: Y, Mean and InvStdDev (reduced axes kept, stash type)."""
    name = node.name
    x, dtype = _stash(e, ins[0], attrs, name)
    rank = _rank(e, x)
    axis = int(attrs.get("axis", -1)) % rank
    axes = list(range(axis, rank))
    mean = _reduce(e, "reduce_mean", x, axes, f"{name}_mean")
    centred = e.emit("sub", [x, mean], name=f"{name}_centred")
    inv = _inv_std(e, centred, axes, float(attrs.get("epsilon", 1e-5)), name)
    y = _unstash(e, e.emit("mul", [centred, inv], name=f"{name}_normed"), dtype, name)
    y = e.emit("mul", [y, ins[1]], name=f"{name}_scaled")
    if len(ins) > 2 and ins[2]:
        y = e.emit("add", [y, ins[2]], name=f"{name}_biased")
    outs = [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]
    for index, value in ((1, mean), (2, inv)):
        if _out(node, index):
            outs.append(e.emit("identity", [value], name=f"{name}_out{index}", outputs=[_out(node, index)]))
        else:
            outs.append("")
    return outs


@converts("InstanceNormalization")
def _instance_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    name, x = node.name, ins[0]
    rank = _rank(e, x)
    if rank < 3:
        raise GraphError(f"node {name!r} (InstanceNormalization) needs (N, C, spatial...), got {e.type_of(x)}")
    axes = list(range(2, rank))
    centred = e.emit("sub", [x, _reduce(e, "reduce_mean", x, axes, f"{name}_mean")], name=f"{name}_centred")
    normed = e.emit("mul", [centred, _inv_std(e, centred, axes, float(attrs.get("epsilon", 1e-5)), name)],
                    name=f"{name}_normed")
    y = e.emit("mul", [normed, _channel_view(e, ins[1], rank, f"{name}_scale")], name=f"{name}_scaled")
    y = e.emit("add", [y, _channel_view(e, ins[2], rank, f"{name}_bias")], name=f"{name}_biased")
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


@converts("GroupNormalization")
def _group_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Opset 21: scale and bias per channel; opset 18 (deprecated): per group."""
    name = node.name
    x, dtype = _stash(e, ins[0], attrs, name)
    shape = e.type_of(x).shape
    groups = int(attrs["num_groups"])
    if len(shape) < 3 or shape[1] % groups:
        raise GraphError(f"node {name!r} (GroupNormalization): {shape[1] if len(shape) > 1 else '?'} channels do "
                         f"not split into {groups} groups")
    per_group = int(np.prod(shape[1:], dtype=np.int64)) // groups
    grouped = e.emit("reshape", [x], {"shape": (shape[0], groups, per_group)}, f"{name}_groups")
    centred = e.emit("sub", [grouped, _reduce(e, "reduce_mean", grouped, [2], f"{name}_mean")], name=f"{name}_centred")
    normed = e.emit("mul", [centred, _inv_std(e, centred, [2], float(attrs.get("epsilon", 1e-5)), name)],
                    name=f"{name}_normed")
    y = _unstash(e, e.emit("reshape", [normed], {"shape": shape}, f"{name}_ungroup"), dtype, name)
    scale, bias = ins[1], ins[2]
    if opset < 21:  # one scale and bias per group: repeated over the group's channels
        repeat = e.constant(np.repeat(np.arange(groups, dtype=np.int64), shape[1] // groups), f"{name}_group_of")
        scale = e.emit("gather", [scale, repeat], {"axis": 0}, f"{name}_scale_per_channel")
        bias = e.emit("gather", [bias, repeat], {"axis": 0}, f"{name}_bias_per_channel")
    y = e.emit("mul", [y, _channel_view(e, scale, len(shape), f"{name}_scale")], name=f"{name}_scaled")
    y = e.emit("add", [y, _channel_view(e, bias, len(shape), f"{name}_bias")], name=f"{name}_biased")
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


@converts("MeanVarianceNormalization")
def _mean_variance_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """(x - mean) / sqrt(mean((x - mean)^2) + 1e-9) over `axes` (default 0, 2, 3), as ONNX defines it."""
    name, x = node.name, ins[0]
    rank = _rank(e, x)
    axes = [int(a) % rank for a in attrs.get("axes", [0, 2, 3])]
    centred = e.emit("sub", [x, _reduce(e, "reduce_mean", x, axes, f"{name}_mean")], name=f"{name}_centred")
    y = e.emit("mul", [centred, _inv_std(e, centred, axes, 1e-9, name)], name=name)
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


@converts("LpPool")
def _lp_pool(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """(sum over the window of |x|^p)^(1/p): an average pool of |x|^p counting the padding, times
    the window's size (the average pool's padding, ceil mode and 1-D handling are reused)."""
    from tilegraph.graph.frontends.onnx_ops import CONVERTERS

    name, x = node.name or "lp_pool", ins[0]
    p = int(attrs.get("p", 2))
    if p < 1:
        raise GraphError(f"node {name!r} (LpPool): p must be at least 1, got {p}")
    term = e.emit("abs", [x], name=f"{name}_abs")
    if p > 1:
        term = e.emit("pow", [term, _scalar(e, float(p), x, f"{name}_p")], name=f"{name}_pow")
    inner = type(node)()
    inner.CopyFrom(node)
    inner.op_type = "AveragePool"
    del inner.output[:]
    inner.output.append(f"{name}_mean")
    pool_attrs = {**{k: v for k, v in attrs.items() if k != "p"}, "count_include_pad": 1}
    mean = CONVERTERS["AveragePool"](e, inner, [term], pool_attrs, opset)[0]
    window = float(np.prod(attrs["kernel_shape"]))
    total = e.emit("mul", [mean, _scalar(e, window, x, f"{name}_window")], name=f"{name}_sum")
    y = total if p == 1 else e.emit("pow", [total, _scalar(e, 1.0 / p, x, f"{name}_root")], name=f"{name}_root")
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


@converts("LpNormalization")
def _lp_norm(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    name, x = node.name, ins[0]
    axis = int(attrs.get("axis", -1)) % _rank(e, x)
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        raise GraphError(f"node {name!r} (LpNormalization): p must be 1 or 2, got {p}")
    term = e.emit("abs", [x], name=f"{name}_abs") if p == 1 else e.emit("mul", [x, x], name=f"{name}_sq")
    norm = _reduce(e, "reduce_sum", term, [axis], f"{name}_sum")
    if p == 2:
        norm = e.emit("sqrt", [norm], name=f"{name}_norm")
    zero = _scalar(e, 0.0, x, f"{name}_zero")
    y = e.emit("where", [e.emit("equal", [norm, zero], name=f"{name}_is_zero"), zero,
                         e.emit("div", [x, norm], name=f"{name}_div")], name=name)
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


@converts("GlobalMaxPool", "GlobalAveragePool")
def _global_pool(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    rank = _rank(e, ins[0])
    if node.op_type == "GlobalAveragePool" and rank == 4:
        return [e.emit("global_avg_pool", [ins[0]], {"layout": "NCHW"}, node.name, [_out(node)])]
    if rank < 3:
        raise GraphError(f"node {node.name!r} ({node.op_type}) needs (N, C, spatial...), got {e.type_of(ins[0])}")
    op = "reduce_max" if node.op_type == "GlobalMaxPool" else "reduce_mean"
    return [e.emit(op, [ins[0]], {"axes": tuple(range(2, rank)), "keepdims": 1}, node.name, [_out(node)])]


@converts("Tile")
def _tile(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    repeats = _ints(e, ins[1], f"node {name!r} (Tile) repeats")
    if len(repeats) != len(shape) or any(r < 0 for r in repeats):
        raise GraphError(f"node {name!r} (Tile): repeats {repeats} do not fit {e.type_of(x)}")
    paired = tuple(v for d in shape for v in (1, d))
    expanded = tuple(v for r, d in zip(repeats, shape) for v in (r, d))
    y = e.emit("reshape", [x], {"shape": paired}, f"{name}_pairs")
    y = e.emit("expand", [y], {"shape": expanded}, f"{name}_expand")
    return [e.emit("reshape", [y], {"shape": tuple(r * d for r, d in zip(repeats, shape))}, name, [_out(node)])]


@converts("DepthToSpace", "SpaceToDepth")
def _depth_space(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    if _rank(e, x) != 4:
        raise GraphError(f"node {name!r} ({node.op_type}) needs a 4-D input, got {e.type_of(x)}")
    n, c, h, w = e.type_of(x).shape
    b = int(attrs["blocksize"])
    if node.op_type == "DepthToSpace":
        if c % (b * b):
            raise GraphError(f"node {name!r} (DepthToSpace): {c} channels are not a multiple of {b * b}")
        if attrs.get("mode", "DCR") == "CRD":
            split, perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
        else:
            split, perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
        final = (n, c // (b * b), h * b, w * b)
    else:
        if h % b or w % b:
            raise GraphError(f"node {name!r} (SpaceToDepth): {h}x{w} is not a multiple of the block {b}")
        crd = attrs.get("mode", "DCR") == "CRD"  # SpaceToDepth has modes from opset 28
        split, perm = (n, c, h // b, b, w // b, b), (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        final = (n, c * b * b, h // b, w // b)
    y = e.emit("reshape", [x], {"shape": split}, f"{name}_split")
    y = e.emit("transpose", [y], {"perm": perm}, f"{name}_transpose")
    return [e.emit("reshape", [y], {"shape": final}, name, [_out(node)])]


def _transpose_pads(attrs: dict[str, Any], in_hw: tuple[int, ...], kernel: tuple[int, ...], strides: list[int],
                    dilations: list[int], output_padding: list[int]) -> tuple[list[int], list[int]]:
    """ConvTranspose's (begin, end) padding per spatial axis, from pads, auto_pad or output_shape."""
    auto = attrs.get("auto_pad", "NOTSET")
    spatial = len(in_hw)
    full = [s * (n - 1) + op + (k - 1) * d + 1 for n, k, s, d, op in zip(in_hw, kernel, strides, dilations,
                                                                          output_padding)]
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        wanted = list(attrs["output_shape"])[-spatial:] if "output_shape" in attrs else [n * s for n, s in
                                                                                           zip(in_hw, strides)]
        total = [f - w for f, w in zip(full, wanted)]  # negative: the output reaches past the full one
        if auto == "SAME_UPPER":
            return [t // 2 for t in total], [t - t // 2 for t in total]
        return [t - t // 2 for t in total], [t // 2 for t in total]
    if auto == "VALID":
        return [0] * spatial, [0] * spatial
    pads = list(attrs.get("pads", [0] * (2 * spatial)))
    return pads[:spatial], pads[spatial:]


@converts("ConvTranspose")
def _conv_transpose(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """A convolution of the input with zeros inserted between its pixels (stride - 1 of them),
    padded by (k - 1) * dilation less the op's pads, with the kernel flipped and its channel axes
    swapped per group. 1-D runs as 2-D of height 1; 3-D through conv3d (a conv2d per depth tap)."""
    x, w, name = ins[0], ins[1], node.name
    rank = _rank(e, x)
    if rank == 3:
        x, w = (e.emit("reshape", [t], {"shape": (*e.type_of(t).shape[:2], 1, e.type_of(t).shape[2])},
                       f"{name}_2d{i}") for i, t in enumerate((x, w)))
        two_d = dict(attrs)
        for key in ("kernel_shape", "strides", "dilations", "output_padding"):
            if key in attrs:
                two_d[key] = [1 if key != "output_padding" else 0, *attrs[key]]
        if "pads" in attrs:
            two_d["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
        if "output_shape" in attrs:
            two_d["output_shape"] = [1, list(attrs["output_shape"])[-1]]
        y = _conv_transpose_nd(e, name, x, w, ins[2] if len(ins) > 2 else "", two_d)
        n, c, _, length = e.type_of(y).shape
        return [e.emit("reshape", [y], {"shape": (n, c, length)}, f"{name}_1d", [_out(node)])]
    if rank not in (4, 5):
        raise GraphError(f"node {name!r} (ConvTranspose): only 1-D, 2-D and 3-D transposed convolutions are "
                         f"supported, got {e.type_of(x)}")
    y = _conv_transpose_nd(e, name, x, w, ins[2] if len(ins) > 2 else "", attrs)
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


def _conv_transpose_nd(e: Emitter, name: str, x: str, w: str, bias: str, attrs: dict[str, Any]) -> str:
    """2 or 3 spatial axes: zeros interleaved, padded, then a convolution with the flipped kernel."""
    shape = e.type_of(x).shape
    n, c_in, spatial = shape[0], shape[1], list(shape[2:])
    dims = len(spatial)
    c_out_per_group, kernel = e.type_of(w).shape[1], list(e.type_of(w).shape[2:])
    groups = int(attrs.get("group", 1))
    strides = list(attrs.get("strides", [1] * dims))
    dilations = list(attrs.get("dilations", [1] * dims))
    output_padding = list(attrs.get("output_padding", [0] * dims))
    begin, end = _transpose_pads(attrs, tuple(spatial), tuple(kernel), strides, dilations, output_padding)
    if any(s > 1 for s in strides):  # zeros between the input's pixels
        spread = [n, c_in] + [v for d in spatial for v in (d, 1)]
        y = e.emit("reshape", [x], {"shape": tuple(spread)}, f"{name}_spread")
        y = e.emit("pad", [y], {"before": (0,) * len(spread),
                                "after": (0, 0, *[v for s in strides for v in (0, s - 1)]), "value": 0.0},
                   f"{name}_zeros")
        y = e.emit("reshape", [y], {"shape": (n, c_in, *[d * s for d, s in zip(spatial, strides)])},
                   f"{name}_interleaved")
        x = e.emit("slice", [y], {"begin": (0,) * (dims + 2),
                                  "end": (n, c_in, *[(d - 1) * s + 1 for d, s in zip(spatial, strides)]),
                                  "steps": (1,) * (dims + 2)}, f"{name}_dilated")
    reach = [(k - 1) * d for k, d in zip(kernel, dilations)]
    before = [r - b for r, b in zip(reach, begin)]
    after = [r - f + p for r, f, p in zip(reach, end, output_padding)]
    # (C_in, C_out/g, k...) -> (C_out, C_in/g, k...), spatially flipped
    kernel_t = e.emit("reshape", [w], {"shape": (groups, c_in // groups, c_out_per_group, *kernel)}, f"{name}_wg")
    kernel_t = e.emit("transpose", [kernel_t], {"perm": (0, 2, 1, *range(3, dims + 3))}, f"{name}_wt")
    kernel_t = e.emit("reshape", [kernel_t], {"shape": (groups * c_out_per_group, c_in // groups, *kernel)},
                      f"{name}_wr")
    kernel_t = e.emit("slice", [kernel_t], {"begin": (0, 0, *[k - 1 for k in kernel]),
                                            "end": (groups * c_out_per_group, c_in // groups, *[-k - 1 for k in kernel]),
                                            "steps": (1, 1, *[-1] * dims)}, f"{name}_flip")
    if dims == 3:
        return conv3d(e, x, kernel_t, bias, (1, 1, 1), dilations, before, after, groups, name)
    if any(before) or any(after):
        x = e.emit("pad", [x], {"before": (0, 0, *before), "after": (0, 0, *after), "value": 0.0}, f"{name}_pad")
    conv_attrs = {"layout": "NCHW", "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": tuple(dilations),
                  "groups": groups}
    inputs = [x, kernel_t] + ([bias] if bias else [])
    return e.emit("conv2d", inputs, conv_attrs, name)


@converts("LRN")
def _lrn(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """The channel window [c - floor((size-1)/2), c + ceil((size-1)/2)] summed as `size` shifted
    slices of the zero-padded squares."""
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    size = int(attrs["size"])
    if len(shape) < 3 or size < 1:
        raise GraphError(f"node {name!r} (LRN): needs [N, C, ...] and size >= 1, got {e.type_of(x)}, size {size}")
    rank, channels = len(shape), shape[1]
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = e.emit("mul", [x, x], name=f"{name}_square")
    zeros = (0,) * rank
    padded = e.emit("pad", [square], {"before": (0, low) + zeros[2:], "after": (0, high) + zeros[2:], "value": 0.0},
                    f"{name}_pad")
    total = None
    for offset in range(size):
        begin = (0, offset) + zeros[2:]
        window = e.emit("slice", [padded], {"begin": begin, "end": (shape[0], offset + channels, *shape[2:]),
                                            "steps": (1,) * rank}, f"{name}_shift{offset}")
        total = window if total is None else e.emit("add", [total, window], name=f"{name}_sum{offset}")
    alpha, beta, bias = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75)), float(attrs.get("bias", 1.0))
    base = e.emit("add", [e.emit("mul", [total, _scalar(e, alpha / size, x, f"{name}_alpha")], name=f"{name}_scaled"),
                          _scalar(e, bias, x, f"{name}_bias")], name=f"{name}_base")
    divisor = e.emit("pow", [base, _scalar(e, beta, x, f"{name}_beta")], name=f"{name}_divisor")
    return [e.emit("div", [x, divisor], name=name, outputs=[_out(node)])]


@converts("ReverseSequence")
def _reverse_sequence(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, lens, name = ins[0], ins[1], node.name
    shape = e.type_of(x).shape
    time_axis, batch_axis = int(attrs.get("time_axis", 0)), int(attrs.get("batch_axis", 1))
    if len(shape) < 2 or {time_axis, batch_axis} != {0, 1} or e.type_of(lens).shape != (shape[batch_axis],):
        raise GraphError(f"node {name!r} (ReverseSequence): needs time and batch as axes 0 and 1 and one length "
                         f"per batch entry, got {e.type_of(x)} and lengths {e.type_of(lens)}")
    steps = shape[time_axis]
    pair = [1, 1]
    pair[time_axis] = steps
    t = e.constant(np.arange(steps, dtype=np.int64).reshape(pair), f"{name}_t")
    pair = [1, 1]
    pair[batch_axis] = shape[batch_axis]
    length = e.emit("reshape", [e.emit("cast", [lens], {"to": "int64"}, f"{name}_lens")], {"shape": tuple(pair)},
                    f"{name}_lens_2d")
    reversed_t = e.emit("sub", [e.emit("sub", [length, e.constant(np.ones((), np.int64), f"{name}_one")],
                                       name=f"{name}_last"), t], name=f"{name}_reversed")
    index = e.emit("where", [e.emit("less", [t, length], name=f"{name}_inside"), reversed_t, t], name=f"{name}_index")
    index = e.emit("reshape", [index], {"shape": (shape[0], shape[1]) + (1,) * (len(shape) - 2)}, f"{name}_index_nd")
    index = e.emit("expand", [index], {"shape": shape}, f"{name}_index_full")
    return [e.emit("gather_elements", [x, index], {"axis": time_axis}, name, [_out(node)])]
