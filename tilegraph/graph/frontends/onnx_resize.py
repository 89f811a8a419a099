"""ONNX Resize (opsets 11 to the newest; 10 and Upsample upgrade to it): nearest, linear and cubic,
every coordinate transformation mode, antialias, exclude_outside, axes, keep_aspect_ratio_policy.

Each resized axis reads constant tap tables (frontends/interpolation.py: gathers and weighted
sums); tf_crop_and_resize then sets positions outside the input: where(outside, extrapolation, y).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.interpolation import COORDINATE_MODES, MODES, apply_axis, axis_table
from tilegraph.graph.frontends.onnx_ops import _out, converts
from tilegraph.graph.ir import is_float


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
    if mode != "nearest" and not is_float(e.type_of(x).dtype):
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
        y = apply_axis(e, y, a, indices, weights, mode == "nearest", f"{name}_axis{a}")
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


