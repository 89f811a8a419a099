"""Emitter: a GraphBuilder that folds constants as nodes are added (what frontends build with).

    e = Emitter("model")
    shape = e.constant(np.array([1, -1]))
    y = e.emit("reshape", [x], {"shape": (1, 64)})     # a node, or a constant when x is constant

Frontends need constant values while converting (a Reshape's shape, a Slice's starts), and shape
subgraphs (Shape -> Gather -> Concat -> Reshape) fold away this way before the graph exists.
Folding runs each op's numpy reference, exactly as `passes.fold_constants` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tilegraph.errors import RunTimeValueError
from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Node
from tilegraph.graph.ops.registry import infer_types, op_def, reference_outputs

FOLD_LIMIT_BYTES = 256 << 20  # a folded constant larger than this stays a node (never blow up memory)


def fold_node(b: GraphBuilder, node: Node, inputs: list[str]) -> list[str] | None:
    """`node` (reading `inputs`, names in `b`) evaluated into new constants of `b`, named after its
    outputs, when every input is a constant and the result is at most FOLD_LIMIT_BYTES; else None."""
    if not inputs or not all(not i or i in b.constants for i in inputs) or not op_def(node.op).foldable:
        return None
    types = infer_types(node, [b.type_of(i) if i else None for i in inputs])
    if sum(t.nbytes for t in types) > FOLD_LIMIT_BYTES:
        return None
    values = reference_outputs(node, [b.constants[i] if i else None for i in inputs], types)
    return [b.constant(v, out) for v, out in zip(values, node.outputs)]


class Emitter(GraphBuilder):
    def __init__(self, name: str = "graph"):
        super().__init__(name)
        # every folded constant's node, its inputs and outputs named as constants of this builder:
        # how a value read at the dims' upper bounds is computed at run time (frontends/onnx_dims.py)
        self.recipes: dict[str, Node] = {}

    # converts a subgraph (an If branch, a loop body) in the enclosing scope: (GraphProto, where,
    # tensors bound to its inputs) -> its outputs; set by the frontend that owns the scope
    subgraph: Callable[..., list[str]] | None = None

    def emit(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None, name: str = "",
             outputs: Sequence[str] | None = None, num_outputs: int = 1) -> str:
        return self.emit_multi(op, inputs, attrs, name, outputs, num_outputs)[0]

    def emit_multi(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None, name: str = "",
                   outputs: Sequence[str] | None = None, num_outputs: int = 1) -> list[str]:
        node = Node(op, tuple(inputs), tuple(outputs or [name or op] * num_outputs), attrs or {}, name or op)
        folded = fold_node(self, node, list(inputs))
        if folded is None:
            return self.add_multi(op, inputs, attrs, name, outputs, num_outputs)
        recipe = Node(op, tuple(inputs), tuple(folded), attrs or {}, name or op)
        self.recipes.update((out, recipe) for out in folded)
        return folded

    def value(self, name: str, what: str) -> np.ndarray:
        """The constant value of tensor `name`; RunTimeValueError saying `what` needed it otherwise."""
        if name not in self.constants:
            raise RunTimeValueError(f"{what} must be a constant (computable before run time); {name!r} is not. "
                                    "tilegraph compiles static shapes only", name)
        return self.constants[name]


__all__ = ["Emitter", "FOLD_LIMIT_BYTES", "fold_node"]
