"""ONNX Resize (opsets 11 to the newest; 10 and Upsample upgrade to it): nearest, linear and cubic,
every coordinate transformation mode, antialias, exclude_outside, axes, keep_aspect_ratio_policy.

Interpolation is separable and linear in the data, so each resized axis becomes a constant table
computed here in float64, as ONNX's reference computes it: per output position, the input indices
of its taps (clamped: the edge repeats) and their weights. The graph then reads them:

    nearest             y = gather(x, index[:, 0], axis)                    exact, any dtype
    linear, cubic       y = reduce_sum(gather(x, index, axis) * weight)     taps on a new axis
    tf_crop_and_resize  y = where(outside, extrapolation_value, y)          positions outside the input
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _out, converts

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")


def source_coordinates(mode: str, n_in: int, n_out: int, scale: float, roi: tuple[float, float] | None
                       ) -> tuple[np.ndarray, np.ndarray | None]:
    """The input coordinate of each output position, and (tf_crop_and_resize) which fall outside."""
    y = np.arange(n_out, dtype=np.float64)
    full = scale * n_in  # the output extent before rounding
    if mode == "align_corners":
        return (np.zeros(n_out) if full == 1 else y * (n_in - 1) / (full - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(n_out, -0.5) if full == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / full)
        return offset + (y + 0.5) / scale - 0.5, None
    start, end = roi if roi is not None else (0.0, 1.0)
    x = np.full(n_out, (end - start) * (n_in - 1) / 2) if full == 1 else y * (end - start) * (n_in - 1) / (full - 1)
    x = x + start * (n_in - 1)
    return x, (x < 0) | (x > n_in - 1)


def _nearest(ratio: float, nearest_mode: str) -> np.ndarray:
    if float(ratio).is_integer():
        return np.array([0.0, 1.0])
    prefer = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False, "ceil": True}
    if nearest_mode not in prefer:
        raise GraphError(f"Resize: nearest_mode {nearest_mode!r} is not one of {sorted(prefer)}")
    upper = bool(prefer[nearest_mode])
    return np.array([float(not upper), float(upper)])


def _cubic_weight(x: float, a: float) -> float:
    x = abs(x)
    if x <= 1:
        return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
    if x < 2:
        return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
    return 0.0


def tap_weights(mode: str, ratio: float, scale: float, antialias: bool, cubic_a: float, nearest_mode: str
                ) -> np.ndarray:
    """The weights of one output position's taps (ratio in (0, 1]: its offset past the left tap)."""
    if mode == "nearest":
        return _nearest(ratio, nearest_mode)
    if antialias and scale < 1:  # a wider, scaled kernel when downsampling
        reach = 1 if mode == "linear" else 2
        start = int(math.floor(-reach / scale) + 1)
        positions = [scale * (i - ratio) for i in range(start, 2 - start)]
        weights = np.array([max(0.0, 1 - abs(p)) if mode == "linear" else _cubic_weight(p, cubic_a) for p in positions])
        return weights / weights.sum()
    if mode == "linear":
        return np.array([1 - ratio, ratio])
    return np.array([_cubic_weight(ratio + 1, cubic_a), _cubic_weight(ratio, cubic_a), _cubic_weight(1 - ratio, cubic_a),
                     _cubic_weight(2 - ratio, cubic_a)])


def axis_table(mode: str, coordinate_mode: str, n_in: int, n_out: int, scale: float, roi: tuple[float, float] | None,
               antialias: bool, cubic_a: float, exclude_outside: bool, nearest_mode: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(indices (n_out, taps) clamped into the input, weights (n_out, taps), outside mask or None)."""
    x, outside = source_coordinates(coordinate_mode, n_in, n_out, scale, roi)
    left = np.floor(x)
    ratios = np.where(x == left, 1.0, x - left)
    weights = np.stack([tap_weights(mode, float(r), scale, antialias, cubic_a, nearest_mode) for r in ratios])
    taps = weights.shape[1]
    # the `taps` positions nearest x, ties to the smaller (ONNX's neighbour rule), in edge-padded terms
    pad = int(math.ceil(taps / 2))
    padded = x + pad
    base = np.floor(padded)
    fraction = padded - base
    if taps % 2 == 0:
        offset = np.where(fraction == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        offset = np.where(fraction <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    indices = (base + offset).astype(np.int64)[:, None] + np.arange(taps)[None, :] - pad
    if exclude_outside:
        weights = np.where((indices < 0) | (indices >= n_in), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(indices, 0, n_in - 1), weights, outside


def _floats(e: Emitter, name: str, what: str) -> list[float]:
    return [float(v) for v in np.asarray(e.value(name, what)).reshape(-1)]


def output_plan(shape: tuple[int, ...], axes: list[int], scales: list[float] | None, sizes: list[int] | None,
                policy: str) -> tuple[list[float], list[int]]:
    """(scale, output extent) per axis of the input, as ONNX derives them."""
    rank = len(shape)
    scale = [1.0] * rank
    out = list(shape)
    if sizes is not None:
        for a, s in zip(axes, sizes):
            out[a] = int(s)
            scale[a] = s / shape[a]
        if policy in ("not_larger", "not_smaller"):
            pick = min if policy == "not_larger" else max
            common = pick(scale[a] for a in axes)
            for a in axes:
                scale[a] = common
                out[a] = int(common * shape[a] + 0.5)
        elif policy != "stretch":
            raise GraphError(f"Resize: keep_aspect_ratio_policy {policy!r} is not stretch, not_larger or not_smaller")
    else:
        for a, s in zip(axes, scales or []):
            scale[a] = s
            out[a] = int(s * shape[a])
    return scale, out


@converts("Resize")
def _resize(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    rank = len(shape)
    mode = attrs.get("mode", "nearest")
    coordinate_mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    if mode not in MODES or coordinate_mode not in COORDINATE_MODES:
        raise GraphError(f"node {name!r} (Resize): mode {mode!r} / coordinate_transformation_mode "
                         f"{coordinate_mode!r} is not one of {MODES} / {COORDINATE_MODES}")
    if mode != "nearest" and not e.type_of(x).dtype.startswith("float"):
        raise GraphError(f"node {name!r} (Resize): {mode} interpolation of {e.type_of(x).dtype} is not supported")
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    roi_values = _floats(e, ins[1], f"node {name!r} (Resize) roi") if len(ins) > 1 and ins[1] else []
    scales = _floats(e, ins[2], f"node {name!r} (Resize) scales") if len(ins) > 2 and ins[2] else []
    sizes = [int(v) for v in _floats(e, ins[3], f"node {name!r} (Resize) sizes")] if len(ins) > 3 and ins[3] else []
    if bool(scales) == bool(sizes):
        raise GraphError(f"node {name!r} (Resize): exactly one of scales and sizes must be given")
    scale, out = output_plan(shape, axes, scales or None, sizes or None, attrs.get("keep_aspect_ratio_policy", "stretch"))
    roi = {a: (roi_values[i], roi_values[len(axes) + i]) for i, a in enumerate(axes)} if len(roi_values) == 2 * len(
        axes) else {}
    y = x
    outside_masks = []
    for a in axes:
        identity = math.isclose(scale[a], 1.0) and out[a] == shape[a] and (
            coordinate_mode != "tf_crop_and_resize" or roi.get(a, (0.0, 1.0)) == (0.0, 1.0))
        if identity:
            continue
        if out[a] <= 0:
            raise GraphError(f"node {name!r} (Resize): axis {a} resizes to {out[a]} (zero-sized tensors are refused)")
        indices, weights, outside = axis_table(
            mode, coordinate_mode, shape[a], out[a], scale[a], roi.get(a), bool(attrs.get("antialias", 0)),
            float(attrs.get("cubic_coeff_a", -0.75)), bool(attrs.get("exclude_outside", 0)),
            attrs.get("nearest_mode", "round_prefer_floor"))
        y = _apply_axis(e, y, a, indices, weights, mode == "nearest", f"{name}_axis{a}")
        if outside is not None and outside.any():
            view = [1] * rank
            view[a] = out[a]
            outside_masks.append(outside.reshape(view))
    if outside_masks:
        mask = np.zeros([1] * rank, dtype=bool)
        for m in outside_masks:
            mask = mask | m
        fill = e.constant(np.array(float(attrs.get("extrapolation_value", 0.0)), e.type_of(x).dtype), f"{name}_fill")
        y = e.emit("where", [e.constant(mask, f"{name}_outside"), fill, y], name=f"{name}_extrapolate")
    return [e.emit("identity", [y], name=f"{name}_out", outputs=[_out(node)])]


def _apply_axis(e: Emitter, x: str, axis: int, indices: np.ndarray, weights: np.ndarray, nearest: bool,
                name: str) -> str:
    if nearest:  # one tap of weight 1: a gather, exact for any dtype and for inf/NaN
        chosen = indices[np.arange(len(indices)), np.argmax(weights, axis=1)]
        return e.emit("gather", [x, e.constant(chosen, f"{name}_index")], {"axis": axis}, name)
    taps = e.emit("gather", [x, e.constant(indices, f"{name}_taps")], {"axis": axis}, f"{name}_gather")
    rank = len(e.type_of(x).shape)
    view = [1] * (rank + 1)
    view[axis], view[axis + 1] = weights.shape
    w = e.constant(weights.astype(e.type_of(x).dtype).reshape(view), f"{name}_weights")
    weighted = e.emit("mul", [taps, w], name=f"{name}_weighted")
    return e.emit("reduce_sum", [weighted], {"axes": (axis + 1,), "keepdims": 0}, name)
