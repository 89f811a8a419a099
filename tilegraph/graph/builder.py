"""GraphBuilder: makes graphs node by node, inferring every output type as it goes.

    b = GraphBuilder("mlp")
    x = b.input("x", TensorType((1, 64), "float32"))
    w = b.constant(np.ones((64, 32), np.float32), "w")
    y = b.add("relu", [b.add("matmul", [x, w])])
    g = b.build([y])

Frontends and passes use it; `b.copy(node, graph)` keeps a node of another graph as it is (its
tensor names and types). Names are made unique with a numeric suffix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.ir import DTYPES, Graph, Node, TensorType, readonly
from tilegraph.graph.ops.registry import infer_types


class GraphBuilder:
    def __init__(self, name: str = "graph"):
        self.name = name
        self.inputs: list[str] = []
        self.nodes: list[Node] = []
        self.values: dict[str, TensorType] = {}
        self.constants: dict[str, np.ndarray] = {}
        self._counter = 0
        self._node_names: set[str] = set()  # node names are unique (fusion indexes nodes by name)

    # ---- names ------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        base = base or "t"
        name = base
        while name in self.values:
            self._counter += 1
            name = f"{base}_{self._counter}"
        return name

    def has(self, name: str) -> bool:
        return name in self.values

    def type_of(self, name: str) -> TensorType:
        try:
            return self.values[name]
        except KeyError:
            raise GraphError(f"tensor {name!r} is used before it is defined") from None

    # ---- definitions ----------------------------------------------------------------------
    def input(self, name: str, tensor_type: TensorType) -> str:
        if name in self.values:
            raise GraphError(f"graph input {name!r} is defined twice")
        self.values[name] = tensor_type
        self.inputs.append(name)
        return name

    def constant(self, array: np.ndarray, name: str = "const") -> str:
        array = np.asarray(array)
        if array.dtype.name not in DTYPES:
            raise GraphError(f"constant {name!r} has dtype {array.dtype}, which tilegraph does not support")
        name = self.fresh(name)
        self.values[name] = TensorType(array.shape, str(array.dtype))
        self.constants[name] = readonly(array)
        return name

    def add(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None, name: str = "",
            outputs: Sequence[str] | None = None, num_outputs: int = 1) -> str:
        """Append a node; returns its (first) output's name (`add_multi` returns all)."""
        return self.add_multi(op, inputs, attrs, name, outputs, num_outputs)[0]

    def add_multi(self, op: str, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None, name: str = "",
                  outputs: Sequence[str] | None = None, num_outputs: int = 1) -> list[str]:
        node_name = self._fresh_node_name(name or f"{op}_{len(self.nodes)}")
        wanted = list(outputs) if outputs is not None else [node_name] * num_outputs
        out_names = [self.fresh(o) for o in wanted]
        node = Node(op, tuple(inputs), tuple(out_names), attrs or {}, node_name)
        types = infer_types(node, [self.type_of(i) if i else None for i in node.inputs])
        for o, t in zip(out_names, types):
            self.values[o] = t
        self.nodes.append(node)
        return out_names

    def _fresh_node_name(self, base: str) -> str:
        """`base`, or `base_<n>` when a node already has that name (node names are unique: fusion
        and the kernels' bookkeeping index nodes by name)."""
        name, n = base, 0
        while name in self._node_names:
            n += 1
            name = f"{base}_{n}"
        self._node_names.add(name)
        return name

    def copy(self, node: Node, graph: Graph, rename: Mapping[str, str] | None = None) -> list[str]:
        """Append `node` of `graph` with its inputs renamed by `rename` (types re-inferred)."""
        rename = rename or {}
        inputs = [rename.get(i, i) for i in node.inputs]
        outs = self.add_multi(node.op, inputs, node.attr_dict, node.name, outputs=node.outputs)
        return outs

    def build(self, outputs: Sequence[str]) -> Graph:
        used = {i for n in self.nodes for i in n.inputs} | set(outputs)
        constants = {k: v for k, v in self.constants.items() if k in used}
        values = {k: v for k, v in self.values.items() if k not in self.constants or k in constants}
        return Graph(self.name, tuple(self.inputs), tuple(outputs), tuple(self.nodes), values, constants)

    def build_renamed(self, outputs: Sequence[str], rename: Mapping[str, str]) -> Graph:
        """build() for a pass that renamed tensors: graph outputs keep their names (an identity,
        a view, re-exposes a renamed one)."""
        final = []
        for name in outputs:
            new = rename.get(name, name)
            if new != name and name not in self.values:
                new = self.add("identity", [new], name=f"{name}_output", outputs=[name])
            final.append(new)
        return self.build(final)

    @classmethod
    def like(cls, graph: Graph) -> GraphBuilder:
        """A builder holding `graph`'s inputs and constants (under the same names), no nodes yet."""
        b = cls(graph.name)
        for name in graph.inputs:
            b.input(name, graph.values[name])
        for name, array in graph.constants.items():
            b.values[name] = graph.values[name]
            b.constants[name] = array
        return b


def scalar_of(graph_or_builder: Graph | GraphBuilder, name: str) -> float | int | None:
    """The value of a size-1 constant tensor, else None."""
    array = graph_or_builder.constants.get(name)
    if array is None or array.size != 1:
        return None
    return array.reshape(-1)[0].item()


__all__ = ["GraphBuilder", "scalar_of"]
