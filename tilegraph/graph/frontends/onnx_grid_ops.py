"""ONNX sampling-grid operators (registered into onnx_ops.CONVERTERS).

    AffineGrid(theta [N, 2, 3], size [N, C, H, W])   matmul(base grid [H*W, 3] of (x, y, 1), theta^T)
                                                     -> [N, H, W, 2]; 3-D alike with (x, y, z, 1)

    GridSample(x, grid)                              per output point: taps gathered from x, weighted
                                                     (nearest, linear, cubic; zeros/border/reflection)

The base grid is a constant once `size` is known: normalised coordinates in [-1, 1], pixel
corners (align_corners=1) or pixel centres (0).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _ints, _out, converts


def normalised_coordinates(n: int, align_corners: bool) -> np.ndarray:
    """The n sample positions of one axis in [-1, 1] (corners, or centres of n cells)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (2 * np.arange(n) + 1) / n - 1


@converts("AffineGrid")
def _affine_grid(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    theta, name = ins[0], node.name
    size = _ints(e, ins[1], f"node {name!r} (AffineGrid) size")
    spatial = size[2:]
    t = e.type_of(theta)
    if len(spatial) not in (2, 3) or t.shape != (size[0], len(spatial), len(spatial) + 1):
        raise GraphError(f"node {name!r} (AffineGrid): theta {t} does not fit size {size} ([N, C, H, W] with "
                         "theta [N, 2, 3], or [N, C, D, H, W] with theta [N, 3, 4])")
    if min(spatial) < 1:
        raise GraphError(f"node {name!r} (AffineGrid): size {size} has an empty spatial extent")
    axes = [normalised_coordinates(n, bool(attrs.get("align_corners", 0))) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # (z,) y, x varying along (D,) H, W
    columns = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)))]
    base = np.stack(columns, axis=1)[None].astype(t.dtype)  # [1, points, dims + 1]
    theta_t = e.emit("transpose", [theta], {"perm": (0, 2, 1)}, f"{name}_theta_t")
    grid = e.emit("matmul", [e.constant(base, f"{name}_base"), theta_t], name=f"{name}_points")
    return [e.emit("reshape", [grid], {"shape": (size[0], *spatial, len(spatial))}, name, [_out(node)])]


_CUBIC_ALPHA = -0.75  # Keys' cubic convolution, as GridSample and Resize's cubic mode define it


def _reflect(e: Emitter, x: str, low: float, high: float, name: str) -> str:
    """x folded back into [low, high] by reflecting at the borders as often as it takes."""
    span = high - low

    def c(value: float, label: str) -> str:
        return e.constant(np.array(value, dtype=e.type_of(x).dtype), f"{name}_{label}")

    def fold(distance: str, near: str, far: str, side: str) -> str:
        turns = e.emit("floor", [e.emit("div", [distance, c(span, "span")], name=f"{name}_{side}_ratio")],
                       name=f"{name}_{side}_turns")
        rest = e.emit("sub", [distance, e.emit("mul", [turns, c(span, "span2")], name=f"{name}_{side}_whole")],
                      name=f"{name}_{side}_rest")
        even = e.emit("equal", [e.emit("mod", [turns, c(2.0, "two")], name=f"{name}_{side}_parity"), c(0.0, "zero")],
                      name=f"{name}_{side}_even")
        sign = 1.0 if side == "low" else -1.0
        return e.emit("where", [even, e.emit("add", [near, e.emit("mul", [rest, c(sign, f"{side}_s")],
                                                                     name=f"{name}_{side}_r1")], name=f"{name}_{side}_a"),
                                e.emit("sub", [far, e.emit("mul", [rest, c(sign, f"{side}_t")],
                                                           name=f"{name}_{side}_r2")], name=f"{name}_{side}_b")],
                      name=f"{name}_{side}_folded")

    lo, hi = c(low, "low"), c(high, "high")
    below = fold(e.emit("sub", [lo, x], name=f"{name}_below_by"), lo, hi, "low")
    above = fold(e.emit("sub", [x, hi], name=f"{name}_above_by"), hi, lo, "high")
    y = e.emit("where", [e.emit("less", [x, lo], name=f"{name}_is_below"), below, x], name=f"{name}_lowfix")
    return e.emit("where", [e.emit("greater", [x, hi], name=f"{name}_is_above"), above, y], name=f"{name}_reflected")


def _tap_weights(e: Emitter, t: str, mode: str, name: str) -> list[tuple[int, str | None]]:
    """(offset from floor(x), weight) per tap: linear 0, 1; cubic -1..2 (Keys, alpha -0.75)."""
    def c(value: float, label: str) -> str:
        return e.constant(np.array(value, dtype=e.type_of(t).dtype), f"{name}_{label}")

    if mode == "linear":
        return [(0, e.emit("sub", [c(1.0, "one"), t], name=f"{name}_w0")), (1, t)]
    a = _CUBIC_ALPHA
    weights = []
    for offset in (-1, 0, 1, 2):
        d = e.emit("abs", [e.emit("sub", [t, c(float(offset), f"o{offset + 1}")], name=f"{name}_d{offset + 1}")],
                   name=f"{name}_ad{offset + 1}")
        if offset in (0, 1):  # |d| <= 1: (a + 2)|d|^3 - (a + 3)|d|^2 + 1
            poly = [a + 2, -(a + 3), 0.0, 1.0]
        else:  # 1 < |d| < 2: a|d|^3 - 5a|d|^2 + 8a|d| - 4a
            poly = [a, -5 * a, 8 * a, -4 * a]
        w = c(poly[0], f"p{offset + 1}_0")
        for k, coefficient in enumerate(poly[1:], 1):
            w = e.emit("add", [e.emit("mul", [w, d], name=f"{name}_h{offset + 1}_{k}"), c(coefficient, f"p{offset + 1}_{k}")],
                       name=f"{name}_horner{offset + 1}_{k}")
        weights.append((offset, w))
    return weights


@converts("GridSample")
def _grid_sample(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Per output point and spatial axis: the grid's coordinate denormalised, rounded (nearest),
    moved inside by the padding mode; then the sum over interpolation taps (2 per axis linear,
    4 cubic, 1 nearest) of the product of their weights times the input gathered at the tap (taps
    outside read 0 with zeros padding, the border with border, the reflection with reflection)."""
    x, grid, name = ins[0], ins[1], node.name or "grid_sample"
    xt, gt = e.type_of(x), e.type_of(grid)
    spatial = xt.shape[2:]
    dims = len(spatial)
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(attrs.get("mode", "linear"), attrs.get("mode", "linear"))
    padding = attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    if (dims not in (1, 2, 3) or len(gt.shape) != dims + 2 or gt.shape[0] != xt.shape[0] or gt.shape[-1] != dims
            or mode not in ("linear", "cubic", "nearest") or padding not in ("zeros", "border", "reflection")
            or (mode == "cubic" and dims != 2)):
        raise GraphError(f"node {name!r} (GridSample): input {xt}, grid {gt}, mode {mode!r}, padding {padding!r} "
                         "is not supported (grid [N, *out, D] for D spatial axes; cubic on 2-D)")
    n, channels = xt.shape[:2]
    out = gt.shape[1:-1]
    points = int(np.prod(out))
    dtype = gt.dtype

    def c(value: float, label: str) -> str:
        return e.constant(np.array(value, dtype=dtype), f"{name}_{label}")

    coords = []  # per spatial axis (D, H, W order), the sample position [N, points]
    for axis, length in enumerate(spatial):
        k = dims - 1 - axis  # the grid lists x (the last axis) first
        g = e.emit("slice", [grid], {"begin": (0,) * (dims + 1) + (k,), "end": (*gt.shape[:-1], k + 1),
                                     "steps": (1,) * (dims + 2)}, f"{name}_g{axis}")
        g = e.emit("reshape", [g], {"shape": (n, points)}, f"{name}_g{axis}_flat")
        one = c(1.0, f"one{axis}")
        if align:
            pos = e.emit("mul", [e.emit("add", [g, one], name=f"{name}_p{axis}_a"), c((length - 1) / 2, f"s{axis}")],
                         name=f"{name}_pos{axis}")
        else:
            pos = e.emit("div", [e.emit("sub", [e.emit("mul", [e.emit("add", [g, one], name=f"{name}_p{axis}_a"),
                                                                  c(float(length), f"len{axis}")], name=f"{name}_p{axis}_m"),
                                                 one], name=f"{name}_p{axis}_s"), c(2.0, f"two{axis}")],
                         name=f"{name}_pos{axis}")
        if mode == "nearest":
            pos = e.emit("round", [pos], name=f"{name}_pos{axis}_round")
        low, high = (0.0, length - 1.0) if align else (-0.5, length - 0.5)
        outside = e.emit("or", [e.emit("less", [pos, c(low, f"lo{axis}")], name=f"{name}_under{axis}"),
                                e.emit("greater", [pos, c(high, f"hi{axis}")], name=f"{name}_over{axis}")],
                         name=f"{name}_outside{axis}")
        if padding == "border":
            clamped = e.emit("min", [e.emit("max", [pos, c(0.0, f"z{axis}")], name=f"{name}_cl{axis}"),
                                     c(length - 1.0, f"last{axis}")], name=f"{name}_clamped{axis}")
            pos = e.emit("where", [outside, clamped, pos], name=f"{name}_pos{axis}_border")
        elif padding == "reflection":
            pos = e.emit("where", [outside, _reflect(e, pos, low, high, f"{name}_refl{axis}"), pos],
                         name=f"{name}_pos{axis}_reflected")
        coords.append((pos, length, low, high))
    per_axis = []  # per spatial axis: [(index tensor int64 [N, points], weight or None)]
    for axis, (pos, length, low, high) in enumerate(coords):
        base = e.emit("floor", [pos], name=f"{name}_floor{axis}") if mode != "nearest" else pos
        taps = [(0, None)] if mode == "nearest" else _tap_weights(
            e, e.emit("sub", [pos, base], name=f"{name}_frac{axis}"), mode, f"{name}_w{axis}")
        entries = []
        for offset, weight in taps:
            at = e.emit("add", [base, c(float(offset), f"off{axis}_{offset + 1}")], name=f"{name}_tap{axis}_{offset + 1}")
            if padding == "reflection":
                at = _reflect(e, at, low, high, f"{name}_tref{axis}_{offset + 1}")
            if padding == "zeros":
                inside = e.emit("and", [e.emit("greater_equal", [at, c(0.0, f"z{axis}_{offset + 1}")],
                                               name=f"{name}_ge{axis}_{offset + 1}"),
                                        e.emit("less", [at, c(float(length), f"n{axis}_{offset + 1}")],
                                               name=f"{name}_lt{axis}_{offset + 1}")], name=f"{name}_in{axis}_{offset + 1}")
                mask = e.emit("cast", [inside], {"to": dtype}, f"{name}_mask{axis}_{offset + 1}")
                weight = mask if weight is None else e.emit("mul", [weight, mask], name=f"{name}_mw{axis}_{offset + 1}")
            index = e.emit("cast", [at], {"to": "int64"}, f"{name}_idx{axis}_{offset + 1}")  # truncates, as int() does
            index = e.emit("min", [e.emit("max", [index, e.constant(np.array(0, np.int64), f"{name}_i0{axis}")],
                                          name=f"{name}_imax{axis}_{offset + 1}"),
                                   e.constant(np.array(length - 1, np.int64), f"{name}_in{axis}")],
                           name=f"{name}_iclip{axis}_{offset + 1}")
            entries.append((index, weight))
        per_axis.append(entries)
    flat_input = e.emit("reshape", [x], {"shape": (n, channels, int(np.prod(spatial)))}, f"{name}_flat")
    strides = [int(np.prod(spatial[axis + 1:])) for axis in range(dims)]
    total = None
    for number, combo in enumerate(itertools.product(*per_axis)):
        tag = str(number)
        linear, weight = None, None
        for axis, (index, w) in enumerate(combo):
            term = index if strides[axis] == 1 else e.emit(
                "mul", [index, e.constant(np.array(strides[axis], np.int64), f"{name}_stride{axis}")], name=f"{name}_t{tag}")
            linear = term if linear is None else e.emit("add", [linear, term], name=f"{name}_lin{tag}")
            weight = w if weight is None else (weight if w is None else e.emit("mul", [weight, w], name=f"{name}_wp{tag}"))
        where = e.emit("expand", [e.emit("reshape", [linear], {"shape": (n, 1, points)}, f"{name}_li{tag}")],
                       {"shape": (n, channels, points)}, f"{name}_lx{tag}")
        value = e.emit("gather_elements", [flat_input, where], {"axis": 2}, f"{name}_pick{tag}")
        if weight is not None:
            value = e.emit("mul", [value, e.emit("reshape", [weight], {"shape": (n, 1, points)}, f"{name}_wr{tag}")],
                           name=f"{name}_weighted{tag}")
        total = value if total is None else e.emit("add", [total, value], name=f"{name}_sum{tag}")
    return [e.emit("reshape", [total], {"shape": (n, channels, *out)}, name, [_out(node)])]


@converts("DeformConv")
def _deform_conv(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Each kernel tap samples the input bilinearly at its offset position (zero outside, as
    torchvision's deform_conv2d), times the mask; then the convolution is a grouped matmul of the
    weights with those samples."""
    x, w, offset, name = ins[0], ins[1], ins[2], node.name or "deform_conv"
    bias = ins[3] if len(ins) > 3 and ins[3] else ""
    mask = ins[4] if len(ins) > 4 and ins[4] else ""
    xt, wt = e.type_of(x), e.type_of(w)
    if len(xt.shape) != 4 or len(wt.shape) != 4:
        raise GraphError(f"node {name!r} (DeformConv): only 2-D deformable convolutions, got {xt} and {wt}")
    n, channels, height, width = xt.shape
    out_channels, _, kh, kw = wt.shape
    groups, offset_groups = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    sh, sw = (int(s) for s in attrs.get("strides", (1, 1)))
    dh, dw = (int(d) for d in attrs.get("dilations", (1, 1)))
    pt, pl, pb, pr = (int(p) for p in attrs.get("pads", (0, 0, 0, 0)))
    oh, ow = e.type_of(offset).shape[2:]
    taps, points = kh * kw, oh * ow
    if (e.type_of(offset).shape != (n, offset_groups * 2 * taps, oh, ow) or channels % offset_groups
            or channels % groups or out_channels % groups or wt.shape[1] * groups != channels
            or oh != (height + pt + pb - dh * (kh - 1) - 1) // sh + 1 or ow != (width + pl + pr - dw * (kw - 1) - 1) // sw + 1):
        raise GraphError(f"node {name!r} (DeformConv): offset {e.type_of(offset)} does not fit input {xt}, "
                         f"weights {wt} and the attributes")
    dtype = xt.dtype

    def c(value: Any, label: str, kind: str = "") -> str:
        return e.constant(np.asarray(value, dtype=kind or dtype), f"{name}_{label}")

    pairs = e.emit("reshape", [offset], {"shape": (n, offset_groups, taps, 2, oh, ow)}, f"{name}_pairs")
    along = []  # the sample positions: rows, then columns [N, offset groups, taps, oH, oW]
    for k, base in enumerate((np.arange(oh)[:, None] * sh - pt, np.arange(ow)[None, :] * sw - pl)):
        part = e.emit("slice", [pairs], {"begin": (0, 0, 0, k, 0, 0), "end": (n, offset_groups, taps, k + 1, oh, ow),
                                         "steps": (1,) * 6}, f"{name}_d{k}")
        part = e.emit("reshape", [part], {"shape": (n, offset_groups, taps, oh, ow)}, f"{name}_d{k}_flat")
        tap_offset = (np.arange(kh)[:, None] * dh if k == 0 else np.arange(kw)[None, :] * dw)
        tap_offset = np.broadcast_to(tap_offset, (kh, kw)).reshape(taps, 1, 1)
        grid = (tap_offset + base[None]).reshape(1, 1, taps, *base.shape)
        along.append(e.emit("add", [part, c(grid, f"grid{k}")], name=f"{name}_pos{k}"))
    y, xx = along
    valid = e.emit("and", [
        e.emit("and", [e.emit("greater", [y, c(-1.0, "m1y")], name=f"{name}_y_lo"),
                       e.emit("less", [y, c(float(height), "hy")], name=f"{name}_y_hi")], name=f"{name}_y_ok"),
        e.emit("and", [e.emit("greater", [xx, c(-1.0, "m1x")], name=f"{name}_x_lo"),
                       e.emit("less", [xx, c(float(width), "wx")], name=f"{name}_x_hi")], name=f"{name}_x_ok")],
        name=f"{name}_valid")
    floors = [e.emit("floor", [v], name=f"{name}_floor{k}") for k, v in enumerate((y, xx))]
    fracs = [e.emit("sub", [v, f], name=f"{name}_frac{k}") for k, (v, f) in enumerate(zip((y, xx), floors))]
    per_group = channels // offset_groups
    flat_input = e.emit("reshape", [x], {"shape": (n, offset_groups, per_group, height * width)}, f"{name}_flat")
    sampled = None
    for corner, (cy, cx) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        at = [e.emit("add", [f, c(float(d), f"c{corner}_{k}")], name=f"{name}_at{corner}_{k}")
              for k, (f, d) in enumerate(zip(floors, (cy, cx)))]
        weights = [fracs[k] if d else e.emit("sub", [c(1.0, f"one{corner}_{k}"), fracs[k]], name=f"{name}_w{corner}_{k}")
                   for k, d in enumerate((cy, cx))]
        inside = valid
        for k, (a, extent) in enumerate(zip(at, (height, width))):
            inside = e.emit("and", [inside, e.emit("and", [
                e.emit("greater_equal", [a, c(0.0, f"z{corner}_{k}")], name=f"{name}_ge{corner}_{k}"),
                e.emit("less", [a, c(float(extent), f"n{corner}_{k}")], name=f"{name}_lt{corner}_{k}")],
                name=f"{name}_in{corner}_{k}")], name=f"{name}_inside{corner}_{k}")
        weight = e.emit("where", [inside, e.emit("mul", weights, name=f"{name}_wprod{corner}"), c(0.0, f"zw{corner}")],
                        name=f"{name}_weight{corner}")
        index = None
        for k, (a, extent, stride) in enumerate(zip(at, (height, width), (width, 1))):
            i = e.emit("cast", [a], {"to": "int64"}, f"{name}_i{corner}_{k}")
            i = e.emit("min", [e.emit("max", [i, c(0, f"i0{corner}_{k}", "int64")], name=f"{name}_imax{corner}_{k}"),
                               c(extent - 1, f"ihi{corner}_{k}", "int64")], name=f"{name}_iclip{corner}_{k}")
            if stride != 1:
                i = e.emit("mul", [i, c(stride, f"stride{corner}", "int64")], name=f"{name}_row{corner}")
            index = i if index is None else e.emit("add", [index, i], name=f"{name}_index{corner}")
        index = e.emit("reshape", [index], {"shape": (n, offset_groups, 1, taps * points)}, f"{name}_ix{corner}")
        index = e.emit("expand", [index], {"shape": (n, offset_groups, per_group, taps * points)}, f"{name}_ixx{corner}")
        value = e.emit("gather_elements", [flat_input, index], {"axis": 3}, f"{name}_pick{corner}")
        value = e.emit("mul", [value, e.emit("reshape", [weight], {"shape": (n, offset_groups, 1, taps * points)},
                                             f"{name}_wr{corner}")], name=f"{name}_weighted{corner}")
        sampled = value if sampled is None else e.emit("add", [sampled, value], name=f"{name}_sum{corner}")
    if mask:
        m = e.emit("reshape", [mask], {"shape": (n, offset_groups, 1, taps * points)}, f"{name}_mask")
        sampled = e.emit("mul", [sampled, m], name=f"{name}_masked")
    per_conv_group = channels // groups
    columns = e.emit("reshape", [sampled], {"shape": (n, groups, per_conv_group * taps, points)}, f"{name}_columns")
    kernels = e.emit("reshape", [w], {"shape": (1, groups, out_channels // groups, per_conv_group * taps)},
                     f"{name}_kernels")
    y_out = e.emit("matmul", [kernels, columns], name=f"{name}_matmul")
    y_out = e.emit("reshape", [y_out], {"shape": (n, out_channels, oh, ow)}, f"{name}_image")
    if bias:
        y_out = e.emit("add", [y_out, e.emit("reshape", [bias], {"shape": (1, out_channels, 1, 1)}, f"{name}_b")],
                       name=f"{name}_biased")
    return [e.emit("identity", [y_out], name=name, outputs=[_out(node)])]


@converts("RoiAlign")
def _roi_align(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Per region and output bin, `sampling_ratio`^2 bilinear samples (the reference's rules: a
    sample beyond a border by more than one pixel reads 0, one past the last row or column reads
    it), averaged or maxed; the regions' coordinates are data, the sample grid per bin is not."""
    x, rois, batch, name = ins[0], ins[1], ins[2], node.name or "roi_align"
    xt = e.type_of(x)
    n, channels, height, width = xt.shape
    regions = e.type_of(rois).shape[0]
    out_h, out_w = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    ratio = int(attrs.get("sampling_ratio", 0))
    mode = attrs.get("mode", "avg")
    half = attrs.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    scale = float(attrs.get("spatial_scale", 1.0))
    if ratio < 1:
        raise GraphError(f"node {name!r} (RoiAlign): sampling_ratio 0 (samples per bin from each region's size) "
                         "makes the sample count depend on the data; give sampling_ratio > 0")
    if len(xt.shape) != 4 or e.type_of(rois).shape != (regions, 4) or mode not in ("avg", "max"):
        raise GraphError(f"node {name!r} (RoiAlign): needs X [N, C, H, W], rois [R, 4] and mode avg or max")
    dtype = xt.dtype

    def c(value: Any, label: str, kind: str = "") -> str:
        return e.constant(np.asarray(value, dtype=kind or dtype), f"{name}_{label}")

    def corner(k: int) -> str:
        part = e.emit("slice", [rois], {"begin": (0, k), "end": (regions, k + 1), "steps": (1, 1)}, f"{name}_r{k}")
        shifted = e.emit("mul", [part, c(scale, f"scale{k}")], name=f"{name}_scaled{k}")
        return e.emit("sub", [shifted, c(0.5, f"half{k}")], name=f"{name}_start{k}") if half else shifted

    samples = []  # per axis: positions [R, bins * ratio], extent
    for axis, (bins, extent) in enumerate(((out_h, height), (out_w, width))):
        start, end = corner(1 - axis), corner(3 - axis)  # rois are (x1, y1, x2, y2)
        size = e.emit("sub", [end, start], name=f"{name}_size{axis}")
        if not half:
            size = e.emit("max", [size, c(1.0, f"min_size{axis}")], name=f"{name}_size{axis}_1")
        step = e.emit("div", [size, c(float(bins), f"bins{axis}")], name=f"{name}_bin{axis}")
        where_in_bin = (np.arange(bins)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(1, -1)
        samples.append((e.emit("add", [start, e.emit("mul", [step, c(where_in_bin, f"grid{axis}")],
                                                     name=f"{name}_offset{axis}")], name=f"{name}_pos{axis}"), extent))
    (ys, h), (xs, w) = samples
    y = e.emit("reshape", [ys], {"shape": (regions, out_h * ratio, 1)}, f"{name}_y")
    xx = e.emit("reshape", [xs], {"shape": (regions, 1, out_w * ratio)}, f"{name}_x")
    outside = e.emit("or", [
        e.emit("or", [e.emit("less", [y, c(-1.0, "ylo")], name=f"{name}_y_lo"),
                      e.emit("greater", [y, c(float(h), "yhi")], name=f"{name}_y_hi")], name=f"{name}_y_out"),
        e.emit("or", [e.emit("less", [xx, c(-1.0, "xlo")], name=f"{name}_x_lo"),
                      e.emit("greater", [xx, c(float(w), "xhi")], name=f"{name}_x_hi")], name=f"{name}_x_out")],
        name=f"{name}_outside")
    per_axis = []
    for axis, (v, extent) in enumerate(((y, h), (xx, w))):
        v = e.emit("max", [v, c(0.0, f"zero{axis}")], name=f"{name}_clamp{axis}")
        low = e.emit("floor", [v], name=f"{name}_low{axis}")
        last = e.emit("greater_equal", [low, c(float(extent - 1), f"last{axis}")], name=f"{name}_at_last{axis}")
        low = e.emit("where", [last, c(float(extent - 1), f"lastv{axis}"), low], name=f"{name}_low{axis}_fix")
        v = e.emit("where", [last, low, v], name=f"{name}_v{axis}_fix")
        high = e.emit("where", [last, low, e.emit("add", [low, c(1.0, f"one{axis}")], name=f"{name}_up{axis}")],
                      name=f"{name}_high{axis}")
        frac = e.emit("sub", [v, low], name=f"{name}_frac{axis}")
        per_axis.append(((low, e.emit("sub", [c(1.0, f"onew{axis}"), frac], name=f"{name}_wlow{axis}")), (high, frac)))
    flat = e.emit("gather", [e.emit("reshape", [x], {"shape": (n, channels, height * width)}, f"{name}_flat"),
                             e.emit("cast", [batch], {"to": "int64"}, f"{name}_batch")], {"axis": 0}, f"{name}_images")
    count = out_h * ratio * out_w * ratio
    combined = None
    for k, ((yi, wy), (xi, wx)) in enumerate(itertools.product(*per_axis)):
        weight = e.emit("where", [outside, c(0.0, f"zw{k}"), e.emit("mul", [wy, wx], name=f"{name}_w{k}")],
                        name=f"{name}_weight{k}")
        position = e.emit("add", [e.emit("mul", [yi, c(float(w), f"row{k}")], name=f"{name}_rowpos{k}"), xi],
                          name=f"{name}_pos{k}")
        position = e.emit("where", [outside, c(0.0, f"zp{k}"), position], name=f"{name}_posfix{k}")
        index = e.emit("cast", [e.emit("reshape", [position], {"shape": (regions, 1, count)}, f"{name}_pr{k}")],
                       {"to": "int64"}, f"{name}_index{k}")
        index = e.emit("expand", [index], {"shape": (regions, channels, count)}, f"{name}_indexx{k}")
        value = e.emit("mul", [e.emit("gather_elements", [flat, index], {"axis": 2}, f"{name}_pick{k}"),
                               e.emit("reshape", [weight], {"shape": (regions, 1, count)}, f"{name}_wr{k}")],
                       name=f"{name}_term{k}")
        combined = value if combined is None else e.emit("add" if mode == "avg" else "max", [combined, value],
                                                         name=f"{name}_acc{k}")
    bins = e.emit("reshape", [combined], {"shape": (regions, channels, out_h, ratio, out_w, ratio)}, f"{name}_bins")
    if mode == "avg":
        y_out = e.emit("div", [e.emit("reduce_sum", [bins], {"axes": (3, 5), "keepdims": 0}, f"{name}_sum"),
                               c(float(ratio * ratio), "count")], name=f"{name}_mean")
    else:
        y_out = e.emit("reduce_max", [bins], {"axes": (3, 5), "keepdims": 0}, f"{name}_max")
    return [e.emit("identity", [y_out], name=name, outputs=[_out(node)])]
