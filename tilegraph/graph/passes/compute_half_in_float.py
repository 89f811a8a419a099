"""compute_half_in_float: float16 operators compute in float32, their results rounded to float16
(as ONNX Runtime's CPU kernels do): C's _Float16 arithmetic would round every step, reductions
included, and drift ulps from the reference. Data movement keeps float16 (it is exact).

before:   y: float16 = matmul(a: float16, b: float16)
after:    y = cast(matmul(cast(a, float32), cast(b, float32)), float16)

Casts between neighbouring computing nodes fuse into their kernels' prologues and epilogues.
"""

from __future__ import annotations

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

# ops whose float16 results equal their inputs' values: nothing to round, no cast needed
_EXACT = frozenset({"cast", "reshape", "identity", "transpose", "concat", "slice", "gather", "gather_elements",
                    "expand", "pad", "max", "min", "neg", "abs", "relu", "equal", "less", "greater", "less_equal",
                    "greater_equal", "isnan", "where", "reduce_max", "reduce_min", "max_pool2d", "clip"})


def _computes_in_half(node: Node, graph: Graph) -> bool:
    if node.op in _EXACT:
        return False
    touched = [*node.inputs, *node.outputs]
    return any(t and graph.values[t].dtype == "float16" for t in touched)


def compute_half_in_float(graph: Graph, fired: list[str] | None = None) -> Graph:
    if not any(_computes_in_half(node, graph) for node in graph.nodes):
        return graph
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        if not _computes_in_half(node, graph):
            b.copy(node, graph, rename)
            continue
        inputs = []
        for i in node.inputs:
            source = rename.get(i, i)
            if i and graph.values[i].dtype == "float16":
                source = b.add("cast", [source], {"to": "float32"}, f"{node.name}_in_float")
            inputs.append(source)
        wide = [b.fresh(f"{out}_float") if graph.values[out].dtype == "float16" else out for out in node.outputs]
        b.add_multi(node.op, inputs, node.attr_dict, node.name, outputs=wide)
        for out, w in zip(node.outputs, wide):
            if w != out:
                b.add("cast", [w], {"to": "float16"}, f"{node.name}_to_half", outputs=[out])
        if fired is not None:
            fired.append(f"compute_half_in_float: {node.name} ({node.op}) in float32")
    return b.build_renamed(graph.outputs, rename)
