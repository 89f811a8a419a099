"""eliminate_dead_code: drop nodes no graph output depends on, and unused constants.

before:   a = relu(x); b = exp(x); return a          after:   a = relu(x); return a
"""

from __future__ import annotations

from tilegraph.graph.ir import Graph


def eliminate_dead_code(graph: Graph, fired: list[str] | None = None) -> Graph:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs):
            kept.append(node)
            live.update(i for i in node.inputs if i)
        elif fired is not None:
            fired.append(f"eliminate_dead_code: {node.name} ({node.op})")
    kept.reverse()
    defined = set(graph.inputs) | {o for n in kept for o in n.outputs}
    constants = {k: v for k, v in graph.constants.items() if k in live}
    values = {k: v for k, v in graph.values.items() if k in defined or k in constants}
    return graph.replace(nodes=tuple(kept), constants=constants, values=values)
