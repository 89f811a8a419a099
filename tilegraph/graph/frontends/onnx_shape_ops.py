"""ONNX shape and data-movement operators as graph ops (registered into onnx_ops.CONVERTERS).

Shape, ConstantOfShape, Range and Constant make constants; Reshape, Flatten, Squeeze and
Unsqueeze become views; Split becomes one slice per output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import FOLD_LIMIT_BYTES, Emitter
from tilegraph.graph.frontends.onnx_ops import _ints, _out, _rank, converts


def _reshape(e: Emitter, x: str, shape: tuple[int, ...], node: Any, out: str) -> str:
    return e.emit("reshape", [x], {"shape": tuple(int(s) for s in shape)}, node.name, [out])


@converts("Reshape")
def _reshape_op(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x_shape = e.type_of(ins[0]).shape
    shape = _ints(e, ins[1], f"node {node.name!r} (Reshape) shape")
    if not attrs.get("allowzero", 0):
        shape = [x_shape[d] if s == 0 else s for d, s in enumerate(shape)]
    if shape.count(-1) == 1:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        shape[shape.index(-1)] = int(np.prod(x_shape, dtype=np.int64)) // max(known, 1)
    return [_reshape(e, ins[0], tuple(shape), node, _out(node))]


@converts("Flatten")
def _flatten(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = e.type_of(ins[0]).shape
    axis = int(attrs.get("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise GraphError(f"node {node.name!r} (Flatten): axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    return [_reshape(e, ins[0], (outer, int(np.prod(shape[axis:], dtype=np.int64))), node, _out(node))]


def _axes(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any]) -> list[int] | None:
    if len(ins) > 1 and ins[1]:
        return _ints(e, ins[1], f"node {node.name!r} ({node.op_type}) axes")
    return list(attrs["axes"]) if "axes" in attrs else None


@converts("Squeeze")
def _squeeze(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = e.type_of(ins[0]).shape
    axes = _axes(e, node, ins, attrs)
    drop = {a % len(shape) for a in axes} if axes is not None else {d for d, s in enumerate(shape) if s == 1}
    if any(shape[d] != 1 for d in drop):
        raise GraphError(f"node {node.name!r} (Squeeze): axes {sorted(drop)} of {shape} are not all 1")
    return [_reshape(e, ins[0], tuple(s for d, s in enumerate(shape) if d not in drop), node, _out(node))]


@converts("Unsqueeze")
def _unsqueeze(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = list(e.type_of(ins[0]).shape)
    axes = _axes(e, node, ins, attrs) or []
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    return [_reshape(e, ins[0], tuple(shape), node, _out(node))]


@converts("Transpose")
def _transpose(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    perm = tuple(attrs.get("perm", reversed(range(_rank(e, ins[0])))))
    return [e.emit("transpose", [ins[0]], {"perm": perm}, node.name, [_out(node)])]


@converts("Concat")
def _concat(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    parts = [i for i in ins if e.type_of(i).size > 0 or len(ins) == 1]
    return [e.emit("concat", parts, {"axis": int(attrs["axis"])}, node.name, [_out(node)])]


def _slice_attrs(shape: tuple[int, ...], axes: list[int], starts: list[int], ends: list[int], steps: list[int]
                 ) -> dict[str, tuple[int, ...]]:
    """Per-axis begin/end/steps; Python's slice clamps exactly as ONNX does (INT64_MAX / INT64_MIN
    ends mean "to the end" / "to the start")."""
    begin, end, step = [0] * len(shape), list(shape), [1] * len(shape)
    for a, s, t, st in zip(axes, starts, ends, steps):
        begin[a % len(shape)], end[a % len(shape)], step[a % len(shape)] = s, t, st
    return {"begin": tuple(begin), "end": tuple(end), "steps": tuple(step)}


@converts("Slice")
def _slice(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = e.type_of(ins[0]).shape
    starts = _ints(e, ins[1], f"node {node.name!r} (Slice) starts")
    ends = _ints(e, ins[2], f"node {node.name!r} (Slice) ends")
    axes = _ints(e, ins[3], f"node {node.name!r} (Slice) axes") if len(ins) > 3 and ins[3] else list(range(len(starts)))
    steps = _ints(e, ins[4], f"node {node.name!r} (Slice) steps") if len(ins) > 4 and ins[4] else [1] * len(starts)
    params = _slice_attrs(shape, axes, starts, ends, steps)
    return [e.emit("slice", [ins[0]], params, node.name, [_out(node)])]


@converts("Split")
def _split(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = e.type_of(ins[0]).shape
    axis = int(attrs.get("axis", 0)) % len(shape)
    if len(ins) > 1 and ins[1]:
        sizes = _ints(e, ins[1], f"node {node.name!r} (Split) sizes")
    elif "split" in attrs:
        sizes = list(attrs["split"])
    else:
        parts = int(attrs.get("num_outputs", len(node.output)))
        chunk = -(-shape[axis] // parts)
        sizes = [min(chunk, shape[axis] - chunk * i) for i in range(parts)]
    outs, start = [], 0
    for index, size in enumerate(sizes):
        begin, end = [0] * len(shape), list(shape)
        begin[axis], end[axis] = start, start + size
        params = {"begin": tuple(begin), "end": tuple(end), "steps": (1,) * len(shape)}
        outs.append(e.emit("slice", [ins[0]], params, f"{node.name}_{index}", [_out(node, index)]))
        start += size
    return outs


@converts("Gather")
def _gather(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    data, indices = ins
    axis = int(attrs.get("axis", 0))
    if e.type_of(indices).shape == ():  # a scalar index drops the axis: gather [i], then reshape
        one = e.emit("reshape", [indices], {"shape": (1,)}, f"{node.name}_index")
        picked = e.emit("gather", [data, one], {"axis": axis}, node.name)
        shape = list(e.type_of(picked).shape)
        shape.pop(axis % len(shape))
        return [_reshape(e, picked, tuple(shape), node, _out(node))]
    return [e.emit("gather", [data, indices], {"axis": axis}, node.name, [_out(node)])]


@converts("GatherElements")
def _gather_elements(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.emit("gather_elements", ins, {"axis": int(attrs.get("axis", 0))}, node.name, [_out(node)])]


@converts("Expand")
def _expand(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = _ints(e, ins[1], f"node {node.name!r} (Expand) shape")
    full = tuple(int(s) for s in np.broadcast_shapes(e.type_of(ins[0]).shape, tuple(shape)))
    if full == e.type_of(ins[0]).shape:
        return [e.emit("identity", [ins[0]], name=node.name, outputs=[_out(node)])]
    return [e.emit("expand", [ins[0]], {"shape": full}, node.name, [_out(node)])]


@converts("Pad")
def _pad(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    mode = attrs.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise GraphError(f"node {node.name!r} (Pad): mode {mode!r} is not constant, edge, reflect or wrap")
    rank = _rank(e, ins[0])
    pads = _ints(e, ins[1], f"node {node.name!r} (Pad) pads")
    value = 0.0
    if len(ins) > 2 and ins[2]:
        value = np.asarray(e.value(ins[2], f"node {node.name!r} (Pad) value")).reshape(-1)[0].item()
    axes = _ints(e, ins[3], f"node {node.name!r} (Pad) axes") if len(ins) > 3 and ins[3] else list(range(rank))
    before, after = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        before[a % rank], after[a % rank] = pads[i], pads[i + len(axes)]
    if mode != "constant":
        return [_pad_by_index(e, node, ins[0], before, after, mode)]
    params = {"before": tuple(before), "after": tuple(after), "value": float(value)}
    return [e.emit("pad", [ins[0]], params, node.name, [_out(node)])]


def _pad_by_index(e: Emitter, node: Any, x: str, before: list[int], after: list[int], mode: str) -> str:
    """edge, reflect and wrap padding: per padded axis, a gather of the source position of every
    output position (clamped, mirrored without repeating the edge, or taken modulo the extent)."""
    shape = e.type_of(x).shape
    y = x
    for axis, (b, a) in enumerate(zip(before, after)):
        if not b and not a:
            continue
        n = shape[axis]
        positions = np.arange(-b, n + a)
        if mode == "edge":
            source = np.clip(positions, 0, n - 1)
        elif mode == "wrap":
            source = positions % n
        else:  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
            if n == 1:
                source = np.zeros_like(positions)
            else:
                period = 2 * (n - 1)
                folded = np.abs(positions) % period
                source = np.where(folded >= n, period - folded, folded)
        source = source[max(-b, 0):len(source) - max(-a, 0)] if (b < 0 or a < 0) else source
        y = e.emit("gather", [y, e.constant(source.astype(np.int64), f"{node.name}_src{axis}")], {"axis": axis},
                   f"{node.name}_{mode}{axis}")
    return e.emit("identity", [y], name=f"{node.name}_out", outputs=[_out(node)])


# ---------------------------------------------------------------------------------------- constants
@converts("Shape")
def _shape(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = e.type_of(ins[0]).shape
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return [e.constant(np.array(shape[start:end], dtype=np.int64), _out(node))]


@converts("Size")
def _size(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    return [e.constant(np.array(e.type_of(ins[0]).size, dtype=np.int64), _out(node))]


@converts("ConstantOfShape")
def _constant_of_shape(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    shape = _ints(e, ins[0], f"node {node.name!r} (ConstantOfShape) shape")
    from onnx import numpy_helper

    fill = attrs.get("value")
    fill_value = numpy_helper.to_array(fill).reshape(-1) if fill is not None else np.zeros(1, np.float32)
    if any(d < 0 for d in shape):
        raise GraphError(f"node {node.name!r} (ConstantOfShape): negative extent in shape {list(shape)}")
    if int(np.prod(shape, dtype=np.float64)) * fill_value.dtype.itemsize > FOLD_LIMIT_BYTES:
        # too large to hold as a constant: a run-time broadcast of the fill value (sized like any tensor)
        scalar = e.constant(fill_value[:1].copy(), f"{_out(node)}_value")
        return [e.emit("expand", [scalar], {"shape": tuple(int(d) for d in shape)}, name=node.name or "",
                       outputs=[_out(node)])]
    return [e.constant(np.full(shape, fill_value[0], dtype=fill_value.dtype), _out(node))]


@converts("Range")
def _range(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    start, limit, delta = (np.asarray(e.value(i, f"node {node.name!r} (Range) bounds")).reshape(-1)[0] for i in ins)
    if delta == 0:
        raise GraphError(f"node {node.name!r} (Range): delta is 0")
    count = max(0.0, np.ceil((float(limit) - float(start)) / float(delta)))
    if count * np.asarray(start).dtype.itemsize > FOLD_LIMIT_BYTES:
        raise GraphError(f"node {node.name!r} (Range): {count:.0f} elements is more than tilegraph holds as a constant")
    return [e.constant(np.arange(start, limit, delta, dtype=np.asarray(start).dtype), _out(node))]


@converts("Constant")
def _constant(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    from onnx import numpy_helper

    if "value" in attrs:
        array = numpy_helper.to_array(attrs["value"])
    elif "value_float" in attrs:
        array = np.array(attrs["value_float"], np.float32)
    elif "value_floats" in attrs:
        array = np.array(attrs["value_floats"], np.float32)
    elif "value_int" in attrs:
        array = np.array(attrs["value_int"], np.int64)
    elif "value_ints" in attrs:
        array = np.array(attrs["value_ints"], np.int64)
    else:
        raise GraphError(f"node {node.name!r} (Constant): attribute {sorted(attrs)} is not supported")
    return [e.constant(array, _out(node))]


@converts("CenterCropPad")
def _center_crop_pad(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """A slice around the centre where an axis shrinks, a zero pad around it where it grows (the
    odd element goes to the end in both)."""
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    rank = len(shape)
    wanted = _ints(e, ins[1], f"node {name!r} (CenterCropPad) shape")
    axes = [int(a) for a in attrs.get("axes", range(rank))]
    if len(axes) != len(wanted) or any(not -rank <= a < rank for a in axes) or min(wanted, default=1) < 1:
        raise GraphError(f"node {name!r} (CenterCropPad): shape {wanted} does not fit axes {axes} of {e.type_of(x)}")
    target = list(shape)
    for a, n in zip(axes, wanted):
        target[a % rank] = n
    begin = [max(0, (s - t) // 2) for s, t in zip(shape, target)]
    end = [b + min(s, t) for b, s, t in zip(begin, shape, target)]
    y = x
    if begin != [0] * rank or end != list(shape):
        y = e.emit("slice", [y], {"begin": tuple(begin), "end": tuple(end), "steps": (1,) * rank}, f"{name}_crop")
    before = [max(0, (t - s) // 2) for s, t in zip(shape, target)]
    after = [max(0, t - s) - b for s, t, b in zip(shape, target, before)]
    if any(before) or any(after):
        y = e.emit("pad", [y], {"before": tuple(before), "after": tuple(after), "value": 0.0}, f"{name}_pad")
    return [e.emit("identity", [y], name=name, outputs=[_out(node)])]


@converts("BitCast")
def _bit_cast(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """The input's bytes as another type of the same width: an alias, no kernel (graph op bitcast)."""
    from tilegraph.graph.frontends.onnx_ops import dtype_of

    to = dtype_of(int(attrs["to"]), f"node {node.name!r} (BitCast) to")
    return [e.emit("bitcast", [ins[0]], {"to": to}, node.name, [_out(node)])]
