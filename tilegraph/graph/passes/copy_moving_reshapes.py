"""copy_moving_reshapes: a reshape over run-time extents whose elements move in storage becomes a
reshape_copy, computed by a kernel; a reshape is otherwise a view of its input's bytes.

Storage holds every tensor at the dims' upper bounds, the elements of the run-time extents in the
leading block of each axis. Merging (batch, seq) into batch*seq rows packs them: row b*seq + s of
the result is row (b, s) of the input, stored at b*S + s (S: seq's upper bound), so a view would
read the wrong rows as soon as seq < S (ops/transform.reshape_keeps_storage says which keep it).

before:   rows = reshape(x, shape=(320, 768))          x: (batch, seq, 768), stored (8, 40, 768)
after:    rows = reshape_copy(x, shape=(320, 768))     extents (batch*seq, 768)
Reshapes that keep storage ((batch, seq, 768) -> (batch, seq, 12, 64)) stay views.
"""

from __future__ import annotations

from tilegraph.graph.ir import Graph, Node
from tilegraph.ops.transform import reshape_keeps_storage


def copy_moving_reshapes(graph: Graph, fired: list[str] | None = None) -> Graph:
    """`graph` with every reshape whose elements move in storage a reshape_copy (`fired` gets a line
    per node changed)."""
    if not graph.dims:
        return graph
    extents = graph.extents
    nodes = []
    for node in graph.nodes:
        if node.op == "reshape" and not _keeps_storage(graph, extents, node):
            node = Node("reshape_copy", node.inputs, node.outputs, node.attr_dict, node.name)
            if fired is not None:
                fired.append(f"copy_moving_reshapes: {node.name}")
        nodes.append(node)
    return graph.replace(nodes=tuple(nodes)) if any(a is not b for a, b in zip(nodes, graph.nodes)) else graph


def _keeps_storage(graph: Graph, extents, node: Node) -> bool:  # noqa: ANN001 (the graph's extents mapping)
    x, y = node.inputs[0], node.outputs[0]
    x_shape, y_shape = graph.type_of(x).shape, graph.type_of(y).shape
    return reshape_keeps_storage(extents.get(x, x_shape), x_shape, extents.get(y, y_shape), y_shape)


__all__ = ["copy_moving_reshapes"]
