"""fold_constants: nodes whose inputs are all constants become constants (their op's reference).

before:   s = shape_const; t = mul(s, 2); y = reshape(x, ...); w2 = transpose(w, perm=(2, 3, 1, 0))
after:    t and w2 are constants (w2 holds w's bytes transposed); nodes reading them read constants

A fold larger than FOLD_LIMIT_BYTES stays a node (never blow up memory).
"""

from __future__ import annotations

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.frontends.emitter import FOLD_LIMIT_BYTES
from tilegraph.graph.ir import Graph
from tilegraph.graph.ops.registry import reference_outputs


def fold_constants(graph: Graph, fired: list[str] | None = None) -> Graph:
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        inputs = [rename.get(i, i) for i in node.inputs]
        types = [graph.values[o] for o in node.outputs]
        if inputs and all(not i or i in b.constants for i in inputs) and sum(t.nbytes for t in types) <= FOLD_LIMIT_BYTES:
            values = reference_outputs(node, [b.constants[i] if i else None for i in inputs], types)
            for out, value in zip(node.outputs, values):
                rename[out] = b.constant(value, out)
            if fired is not None:
                fired.append(f"fold_constants: {node.name} ({node.op})")
            continue
        b.copy(node, graph, rename)
    return b.build_renamed(graph.outputs, rename)
