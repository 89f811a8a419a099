"""The table of graph operators: for each, shape inference, a numpy reference and a te lowering.

    @register("relu", elementwise=True)
    class Relu(OpDef):
        def infer(self, node, types): return [types[0]]
        def reference(self, node, xs): return [np.maximum(xs[0], 0)]
        def lower(self, node, args): return [ops.relu(args[0])]

`infer` gets the input TensorTypes (None for an omitted optional input) and returns the outputs';
`reference` computes in numpy (floats in float64; the executor casts to the declared dtype);
`lower` gets te tensors (or Python scalars for size-1 constants where `scalar_args`) and returns
te tensors built from tilegraph.ops. A `view` op (reshape) moves no data: the compiled model gives
its output the input's storage. Shapes are static; 0-d tensors lower as shape (1,).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Node, TensorType

OPS: dict[str, OpDef] = {}


class OpDef:
    """One graph operator (subclasses override infer, reference, lower)."""

    name = ""
    elementwise = False  # out[i] depends on inputs at i (broadcast): layout-agnostic, transposes pass through
    view = False  # output is the input's bytes under another shape
    fusable = True  # False: never computed inside a kernel (a view that stays an alias of its input's bytes)
    scalar_args = False  # size-1 constant inputs may be lowered as Python scalars
    tuned = True  # False: an anchor whose default schedule is final (no tuning task, nothing constructed)
    foldable = True  # False: never evaluated at compile time (its value depends on the run-time dims)
    arity: tuple[int, int] = (1, 1)  # (min, max) number of inputs

    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        raise NotImplementedError

    def reference(self, node: Node, xs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        raise NotImplementedError

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        raise NotImplementedError


def register(name: str, **flags: Any):  # noqa: ANN201 (a class decorator)
    def wrap(cls: type[OpDef]) -> type[OpDef]:
        op = cls()
        op.name = name
        for key, value in flags.items():
            setattr(op, key, value)
        OPS[name] = op
        return cls

    return wrap


def op_def(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown graph op {name!r}") from None


def infer_types(node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
    """The node's output types; GraphError naming the node when its inputs do not fit its op."""
    op = op_def(node.op)
    low, high = op.arity
    if not low <= len(types) <= high:
        raise GraphError(f"node {node.name!r} ({node.op}) takes {low}..{high} inputs, got {len(types)}")
    try:
        out = op.infer(node, types)
    except GraphError:
        raise
    except (ValueError, TypeError, IndexError) as e:
        shapes = ", ".join(str(t) for t in types)
        raise GraphError(f"node {node.name!r} ({node.op}) cannot take inputs {shapes}: {e}") from None
    if len(out) != len(node.outputs):
        raise GraphError(f"node {node.name!r} ({node.op}) has {len(node.outputs)} outputs, its op makes {len(out)}")
    return out


def reference_outputs(node: Node, xs: Sequence[np.ndarray | None], types: Sequence[TensorType]) -> list[np.ndarray]:
    """The node's outputs by its numpy reference, in the declared dtypes and shapes."""
    with np.errstate(all="ignore"):
        outs = op_def(node.op).reference(node, xs)
    return [np.asarray(o).astype(t.dtype, copy=False).reshape(t.shape).copy(order="C")
            for o, t in zip(outs, types)]


def f64(x: np.ndarray) -> np.ndarray:
    """Floats computed in float64 (the reference's precision); ints and bools as they are."""
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def same(t: TensorType, shape: Sequence[int] | None = None, dtype: str | None = None) -> TensorType:
    return TensorType(tuple(t.shape if shape is None else shape), dtype or t.dtype)


def te_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The te shape of a graph tensor: 0-d tensors are stored as one element, shape (1,)."""
    return tuple(shape) or (1,)


def normalize_axis(axis: int, ndim: int, node: Node) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise GraphError(f"node {node.name!r} ({node.op}): axis {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)


__all__ = ["OPS", "OpDef", "register", "op_def", "infer_types", "reference_outputs", "f64", "same", "te_shape",
           "normalize_axis"]
