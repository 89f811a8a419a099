"""fold_constants: nodes whose inputs are all constants become constants (their op's reference).

before:   s = shape_const; t = mul(s, 2); y = reshape(x, ...); w2 = transpose(w, perm=(2, 3, 1, 0))
after:    t and w2 are constants (w2 holds w's bytes transposed); nodes reading them read constants

A fold larger than FOLD_LIMIT_BYTES stays a node (never blow up memory).
"""

from __future__ import annotations

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.frontends.emitter import fold_node
from tilegraph.graph.ir import Graph


def fold_constants(graph: Graph, fired: list[str] | None = None) -> Graph:
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        folded = fold_node(b, node, [rename.get(i, i) for i in node.inputs])
        if folded is not None:
            rename.update(zip(node.outputs, folded))
            if fired is not None:
                fired.append(f"fold_constants: {node.name} ({node.op})")
            continue
        b.copy(node, graph, rename)
    return b.build_renamed(graph.outputs, rename)
