"""fold_scale_into_weights: a scalar multiply (or divide) of a GEMM's result, through layout ops,
is folded into the GEMM's constant weights and bias (OLLIE's derivation rule: matmul and bias add
are linear, reshape and transpose only move values).

before:   y = mul(transpose(reshape(add(matmul(x, W), b))), c)     c a constant scalar
after:    y = transpose(reshape(add(matmul(x, W * c), b * c)))

Legal: c is a size-1 float constant (nonzero for a divide); W a constant; b, when there, a
constant; every tensor from the matmul to the multiply has that one reader and is not a graph
output, and the multiply's result is not a graph output (so nothing sees the unscaled values and
every output keeps its name). Attention's 1/sqrt(d) on Q and K (the SDPA export scales both)
then costs nothing.
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

LAYOUT = frozenset({"reshape", "transpose", "identity"})


def _scalar(graph: Graph, name: str) -> float | None:
    array = graph.constants.get(name)
    if array is None or array.size != 1 or array.dtype.kind != "f":
        return None
    return float(array.reshape(()))


def _chain(graph: Graph, node: Node, producers: dict[str, Node], consumers: dict[str, list[Node]]
           ) -> tuple[Node, Node | None, float] | None:
    """(matmul, bias add or None, factor) when `node` is a foldable scale, else None."""
    if node.op not in ("mul", "div") or len(node.inputs) != 2 or node.outputs[0] in graph.outputs:
        return None
    a, b = node.inputs
    factor = _scalar(graph, b)
    data = a
    if factor is None and node.op == "mul":
        factor, data = _scalar(graph, a), b
    if factor is None or data in graph.constants or not np.isfinite(factor):
        return None
    if node.op == "div":
        if factor == 0.0:
            return None
        factor = 1.0 / factor

    def sole(tensor: str) -> Node | None:
        if tensor in graph.outputs or len(consumers.get(tensor, ())) != 1:
            return None
        return producers.get(tensor)

    p = sole(data)
    while p is not None and p.op in LAYOUT:
        p = sole(p.inputs[0])
    bias = None
    if p is not None and p.op == "add":
        left, right = p.inputs
        if right in graph.constants and left not in graph.constants:
            bias, p = p, sole(left)
        elif left in graph.constants and right not in graph.constants:
            bias, p = p, sole(right)
        else:
            return None
    if p is None or p.op != "matmul" or p.inputs[1] not in graph.constants or p.inputs[0] in graph.constants:
        return None
    if graph.type_of(node.outputs[0]).dtype != graph.constants[p.inputs[1]].dtype.name:
        return None
    return p, bias, factor


def fold_scale_into_weights(graph: Graph, fired: list[str] | None = None) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()
    folds: dict[str, tuple[Node, Node | None, float]] = {}  # scale output -> (matmul, bias add, factor)
    for node in graph.nodes:
        found = _chain(graph, node, producers, consumers)
        if found is not None:
            folds[node.outputs[0]] = found
    if not folds:
        return graph
    scaled = {m.outputs[0]: f for m, _, f in folds.values()}
    scaled_bias = {a.outputs[0]: f for _, a, f in folds.values() if a is not None}
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        out = node.outputs[0] if node.outputs else None
        if out in folds:
            data = next(i for i in node.inputs if i not in graph.constants)
            rename[out] = rename.get(data, data)
            if fired is not None:
                fired.append(f"fold_scale_into_weights: {node.name} (x{folds[out][2]:.6g}) into "
                             f"{folds[out][0].name}'s weights")
            continue
        if out in scaled or out in scaled_bias:
            factor = scaled.get(out, scaled_bias.get(out))
            inputs = [rename.get(i, i) for i in node.inputs]
            for position, name in enumerate(node.inputs):
                if name in graph.constants:  # W (matmul) or b (add): its own scaled copy
                    array = graph.constants[name]
                    inputs[position] = b.constant((array.astype(np.float64) * factor).astype(array.dtype),
                                                  f"{name}_scaled")
            b.add_multi(node.op, inputs, node.attr_dict, node.name, outputs=node.outputs)
            continue
        b.copy(node, graph, rename)
    return b.build_renamed(graph.outputs, rename)
