"""Graph ops whose values (not only extents) follow the run-time dims.

    y = offset_by_dims(x, terms=(("past:1:512", 1),))     y = x + 1 * (past - 512)

A frontend reads a model at its dims' upper bounds, so a value computed from a dim (positions
past .. past + seq of a decoder with a KV cache) is read as the value at the upper bound. Where
that value moves by a whole step per unit of a dim, the frontend keeps it as its upper-bound
value plus this node (frontends/onnx_dims.py), and the compiled model computes it for the dims of
each call. At the upper bounds the node is the identity, which is what its numpy reference (and
the graph reference, which runs every dim at its upper bound) computes; it is never folded.

Before: positions = constant [512 .. 1023] (read at past = 512, seq = 512)
After:  positions = offset_by_dims(constant [512 .. 1023] over seq, terms=(("past:1:512", 1),))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph import te
from tilegraph.errors import GraphError
from tilegraph.graph.ir import Node, TensorType
from tilegraph.graph.ops.registry import OpDef, register


def dim_terms(node: Node) -> list[tuple[te.Dim, int]]:
    """The node's (te Dim, step) pairs from its `terms` attribute ("name:lower:upper", step)."""
    terms = []
    for tag, step in node.attr("terms"):
        name, lo, hi = tag.split(":")
        terms.append((te.dim(name, int(hi), int(lo)), int(step)))
    return terms


@register("offset_by_dims", foldable=False, tuned=False)  # a few integers: its default schedule is final
class OffsetByDims(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        if not x.dtype.startswith("int"):
            raise GraphError(f"node {node.name!r} (offset_by_dims) offsets integers, got {x}")
        if not node.attr("terms"):
            raise GraphError(f"node {node.name!r} (offset_by_dims) has no terms")
        return [x]

    def reference(self, node: Node, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(xs[0])]  # every dim at its upper bound: no offset

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        x = args[0]
        offset: Any = None
        for d, step in dim_terms(node):
            term = (d - d.upper) * step
            offset = term if offset is None else offset + term
        return [te.compute(x.extents, lambda *i: x[i] + te.cast(x.dtype, offset), name="offset_by_dims")]


__all__ = ["dim_terms"]
