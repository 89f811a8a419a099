"""eliminate_common_subexpressions: a node equal to an earlier one (op, inputs, attributes) reuses
its outputs; equal constants (same dtype, shape and bytes) are merged first.

before:   a = transpose(x, perm=(0, 2, 1)); b = transpose(x, perm=(0, 2, 1)); y = add(a, b)
after:    a = transpose(x, perm=(0, 2, 1)); y = add(a, a)
"""

from __future__ import annotations

import hashlib

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph


def eliminate_common_subexpressions(graph: Graph, fired: list[str] | None = None) -> Graph:
    b = GraphBuilder(graph.name)
    for name in graph.inputs:
        b.input(name, graph.values[name])
    rename: dict[str, str] = {}
    by_content: dict[tuple, str] = {}
    for name, array in graph.constants.items():
        key = (str(array.dtype), array.shape, hashlib.sha256(array.tobytes()).hexdigest())
        if key in by_content:
            rename[name] = by_content[key]
            continue
        by_content[key] = name
        b.values[name] = graph.values[name]
        b.constants[name] = array
    seen: dict[tuple, tuple[str, ...]] = {}
    for node in graph.nodes:
        inputs = tuple(rename.get(i, i) for i in node.inputs)
        key = (node.op, inputs, node.attrs)
        if key in seen and not set(node.outputs) & set(graph.outputs):
            rename.update(zip(node.outputs, seen[key]))
            if fired is not None:
                fired.append(f"eliminate_common_subexpressions: {node.name} ({node.op})")
            continue
        seen[key] = tuple(b.copy(node, graph, rename))
    return b.build_renamed(graph.outputs, rename)
