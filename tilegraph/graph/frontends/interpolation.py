"""Interpolation along one axis as constant tables, shared by ONNX Resize and PyTorch's upsample ops.

Interpolation is separable and linear in the data: per output position, the input indices of its
taps (clamped: the edge repeats) and their weights, computed here in float64 as ONNX's reference
computes them (nearest, linear, cubic; every coordinate transformation mode; antialias;
exclude_outside). The graph then reads them:

    nearest             y = gather(x, index[:, 0], axis)                    exact, any dtype
    linear, cubic       y = reduce_sum(gather(x, index, axis) * weight)     taps on a new axis
"""

from __future__ import annotations

import math

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter

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


def apply_axis(e: Emitter, x: str, axis: int, indices: np.ndarray, weights: np.ndarray, nearest: bool,
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


def resize_axis(e: Emitter, x: str, axis: int, mode: str, coordinate_mode: str, n_in: int, n_out: int, scale: float,
                name: str, nearest_mode: str = "round_prefer_floor", cubic_a: float = -0.75, antialias: bool = False,
                exclude_outside: bool = False, roi: tuple[float, float] | None = None) -> str:
    """x resized along `axis` from n_in to n_out (tf_crop_and_resize's outside positions are the
    caller's: axis_table returns them)."""
    indices, weights, _ = axis_table(mode, coordinate_mode, n_in, n_out, scale, roi, antialias, cubic_a,
                                     exclude_outside, nearest_mode)
    return apply_axis(e, x, axis, indices, weights, mode == "nearest", name)
