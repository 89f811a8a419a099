"""Data-movement graph ops (shapes are static attributes: the frontends fold shape computations).

    y = reshape(x, shape=(1, 128, 12, 64))      a view: no kernel, no copy (also `identity`)
    y = reshape_copy(x, shape=(320, 768))       the same, computed: run-time extents that move (batch*seq)
    y = transpose(x, perm=(0, 2, 1, 3))
    y = concat(a, b, c, axis=1)
    y = slice(x, begin=(0, 0), end=(1, 64), steps=(1, 2))     one entry per axis, numpy clamping
    y = gather(data, indices, axis=0)          numpy take; negative indices wrap
    y = gather_elements(data, indices, axis=1)
    y = expand(x, shape=(2, 3, 4))             broadcast to the full output shape
    y = pad(x, before=(0, 0, 1, 1), after=(0, 0, 1, 1), value=0.0)   constant padding (negative crops)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph import ops
from tilegraph.errors import GraphError
from tilegraph.graph.dims import run_time_target
from tilegraph.graph.index_checks import check_indices
from tilegraph.graph.ir import Node, TensorType
from tilegraph.graph.ops.registry import OpDef, normalize_axis, register, same
from tilegraph.ops.indexing import slice_extent
from tilegraph.testing import reference as ref


@register("reshape", view=True)
class Reshape(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, shape = types[0], tuple(node.attr("shape"))
        if int(np.prod(shape, dtype=np.int64)) != x.size:
            raise GraphError(f"node {node.name!r} (reshape): {x} has {x.size} elements, shape {shape} needs "
                             f"{int(np.prod(shape, dtype=np.int64))}")
        return [same(x, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [xs[0].reshape(node.attr("shape"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.reshape(args[0], run_time_target(node, args[0], tuple(node.attr("shape")) or (1,)))]


@register("reshape_copy")
class ReshapeCopy(Reshape):
    """A reshape over run-time extents that moves elements in storage, computed by a kernel
    (passes/copy_moving_reshapes.py makes it): (batch, seq, 768) -> (batch*seq, 768) packs the
    rows, which a view of storage (batch, S, 768) would leave S apart."""


@register("bitcast", view=True, fusable=False)
class Bitcast(OpDef):
    """The input's bytes read as dtype `to` of the same width (ONNX's BitCast; bfloat16's bits).
    Always an alias of its input (never computed in a kernel: no printer needs a reinterpretation)."""

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, to = types[0], str(node.attr("to"))
        if TensorType((), to).nbytes != TensorType((), x.dtype).nbytes:
            raise GraphError(f"node {node.name!r} (bitcast): {x.dtype} and {to} differ in width")
        return [TensorType(x.shape, to)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.ascontiguousarray(xs[0]).view(np.dtype(str(node.attr("to"))))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        raise GraphError(f"node {node.name!r} (bitcast) is an alias of its input; no kernel computes it")


@register("identity", view=True, elementwise=True)
class Identity(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        return [types[0]]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [xs[0]]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.reshape(args[0], args[0].extents)]


@register("transpose")
class Transpose(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, perm = types[0], tuple(node.attr("perm"))
        if sorted(perm) != list(range(len(x.shape))):
            raise GraphError(f"node {node.name!r} (transpose): perm {perm} is not a permutation of {x}'s axes")
        return [same(x, tuple(x.shape[p] for p in perm))]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [xs[0].transpose(node.attr("perm"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.transpose(args[0], node.attr("perm"))]


@register("concat", arity=(1, 1 << 16))
class Concat(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        first = types[0]
        axis = normalize_axis(node.attr("axis", 0), len(first.shape), node)
        for t in types:
            if t.dtype != first.dtype or t.shape[:axis] + t.shape[axis + 1:] != first.shape[:axis] + first.shape[axis + 1:]:
                raise GraphError(f"node {node.name!r} (concat): {t} does not join {first} along axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(t.shape[axis] for t in types)
        return [same(first, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.concatenate(xs, axis=node.attr("axis", 0))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.concat(list(args), node.attr("axis", 0))]


@register("slice")
class Slice(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        begin, end, steps = node.attr("begin"), node.attr("end"), node.attr("steps")
        if not (len(begin) == len(end) == len(steps) == len(x.shape)) or 0 in steps:
            raise GraphError(f"node {node.name!r} (slice) needs begin, end and non-zero steps per axis of {x}")
        return [same(x, tuple(slice_extent(n, b, e, s)[1] for n, b, e, s in zip(x.shape, begin, end, steps)))]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [ref.strided_slice(xs[0], node.attr("begin"), node.attr("end"), node.attr("steps"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.strided_slice(args[0], node.attr("begin"), node.attr("end"), node.attr("steps"))]


@register("gather", arity=(2, 2))
class Gather(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        data, indices = types
        if indices.dtype not in ("int32", "int64"):
            raise GraphError(f"node {node.name!r} (gather): indices must be int32 or int64, got {indices}")
        axis = normalize_axis(node.attr("axis", 0), len(data.shape), node)
        return [same(data, (*data.shape[:axis], *indices.shape, *data.shape[axis + 1:]))]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        axis = node.attr("axis", 0)
        check_indices(xs[1], xs[0].shape[axis], f"node {node.name!r} (gather)")
        return [np.take(xs[0], xs[1].astype(np.int64), axis=axis)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        data, indices = args
        if indices.ndim == 0:
            raise GraphError(f"node {node.name!r} (gather): scalar indices reach lowering (the frontend reshapes them)")
        return [ops.take(data, indices, node.attr("axis", 0))]


@register("gather_elements", arity=(2, 2))
class GatherElements(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        data, indices = types
        if indices.dtype not in ("int32", "int64") or len(indices.shape) != len(data.shape):
            raise GraphError(f"node {node.name!r} (gather_elements): indices {indices} do not fit data {data}")
        normalize_axis(node.attr("axis", 0), len(data.shape), node)
        return [same(data, indices.shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        axis = node.attr("axis", 0)
        check_indices(xs[1], xs[0].shape[axis], f"node {node.name!r} (gather_elements)")
        return [ref.gather_elements(xs[0], xs[1], axis)]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.gather_elements(args[0], args[1], node.attr("axis", 0))]


@register("expand")
class Expand(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, shape = types[0], tuple(node.attr("shape"))
        if tuple(np.broadcast_shapes(x.shape, shape)) != shape:
            raise GraphError(f"node {node.name!r} (expand): {x} does not broadcast to {shape}")
        return [same(x, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.broadcast_to(xs[0], node.attr("shape"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.broadcast_to(args[0], run_time_target(node, args[0], node.attr("shape")))]


@register("pad")
class Pad(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, before, after = types[0], node.attr("before"), node.attr("after")
        if len(before) != len(x.shape) or len(after) != len(x.shape):
            raise GraphError(f"node {node.name!r} (pad) needs before/after widths per axis of {x}")
        shape = tuple(n + b + a for n, b, a in zip(x.shape, before, after))
        if min(shape, default=1) <= 0:
            raise GraphError(f"node {node.name!r} (pad): widths {before}/{after} leave nothing of {x}")
        return [same(x, shape)]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [ref.pad_constant(xs[0], node.attr("before"), node.attr("after"), node.attr("value", 0.0))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.pad_constant(args[0], node.attr("before"), node.attr("after"), node.attr("value", 0.0))]
