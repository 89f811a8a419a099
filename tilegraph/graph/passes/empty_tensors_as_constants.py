"""empty_tensors_as_constants: a zero-sized tensor holds no values, so it is a constant. Readers of
a zero-sized graph input read an empty constant instead (the input stays in the model's interface),
a node whose outputs are all zero-sized becomes empty constants, and concat drops empty operands.
fold_constants then evaluates whatever reads only constants: a reduction over an empty axis gives
its identity, a cast-like of an empty tensor needs only its type.

before:  data: float32[2, 0, 4] (input);  y: float32[2, 1, 4] = reduce_sum(data, axes=(1,))
after:   data_empty = constant float32[2, 0, 4];  y = reduce_sum(data_empty, axes=(1,))   (folds to zeros)

before:  z: float32[5, 3] = concat(x: float32[5, 3], e: float32[0, 3], axis=0)
after:   z = concat(x, axis=0)
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph


def empty_tensors_as_constants(graph: Graph, fired: list[str] | None = None) -> Graph:
    if not any(t.size == 0 for name, t in graph.values.items() if name not in graph.constants):
        return graph
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}

    def empty(name: str, new_name: str) -> str:
        t = graph.values[name]
        return b.constant(np.zeros(t.shape, t.dtype), new_name)

    for name in graph.inputs:
        if graph.values[name].size == 0:
            rename[name] = empty(name, f"{name}_empty")
    for node in graph.nodes:
        outs = [o for o in node.outputs if o]
        if outs and all(graph.values[o].size == 0 for o in outs):
            rename.update((o, empty(o, o)) for o in outs)  # a graph output keeps its name
            if fired is not None:
                fired.append(f"empty_tensors_as_constants: {node.name} ({node.op}) computes nothing")
            continue
        if node.op == "concat" and any(i and graph.values[i].size == 0 for i in node.inputs):
            kept = [rename.get(i, i) for i in node.inputs if graph.values[i].size != 0]
            b.add_multi("concat", kept, node.attr_dict, node.name, outputs=node.outputs)
            if fired is not None:
                fired.append(f"empty_tensors_as_constants: {node.name} (concat) drops empty operands")
            continue
        b.copy(node, graph, rename)
    return b.build_renamed(graph.outputs, rename)
