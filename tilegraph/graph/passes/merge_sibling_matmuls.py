"""merge_sibling_matmuls: matmuls reading the same tensor with constant weights of the same depth
become one GEMM over the concatenated weights (OLLIE's inter-expression merge; attention's Q, K
and V projections), their bias adds one add; each old result is a slice of the merged one.

before:   q = add(matmul(x, Wq), bq);  k = add(matmul(x, Wk), bk);  v = add(matmul(x, Wv), bv)
after:    qkv = add(matmul(x, concat(Wq, Wk, Wv, axis=1)), concat(bq, bk, bv))
          q = slice(qkv, [..., 0:Nq]);  k = slice(qkv, [..., Nq:Nq+Nk]);  v = slice(qkv, ...)

Legal: every weight is a 2-D constant (K, N_i) with one K, dtype and `accumulate` attr, and the shared input is read
as the left operand. Bias adds merge only when every sibling has one (a constant of shape
(N_i,) that is the matmul's only reader, the matmul not a graph output). The slices are views
the next kernels read in place (fusion takes them as prologues), so x is read once, not three times.
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node


def merge_sibling_matmuls(graph: Graph, fired: list[str] | None = None) -> Graph:
    consumers = graph.consumers()
    families: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        if node.op != "matmul" or node.inputs[1] not in graph.constants or node.inputs[0] in graph.constants:
            continue
        w = graph.constants[node.inputs[1]]
        if w.ndim != 2 or len(graph.type_of(node.inputs[0]).shape) < 2:
            continue
        families.setdefault((node.inputs[0], w.shape[0], str(w.dtype), node.attr("accumulate", None)), []).append(node)
    families = {k: v for k, v in families.items() if len(v) > 1}
    if not families:
        return graph
    plan: dict[str, tuple] = {}  # first sibling's name -> (siblings, bias adds or None)
    dropped: set[str] = set()
    for siblings in families.values():
        biases = [_bias_add(graph, mm, consumers) for mm in siblings]
        adds = biases if all(a is not None for a in biases) else None
        plan[siblings[0].name] = (siblings, adds)
        dropped |= {mm.name for mm in siblings} | ({a.name for a in adds} if adds else set())
    b = GraphBuilder.like(graph)
    for node in graph.nodes:
        if node.name in plan:
            _emit(b, graph, *plan[node.name], fired)
        elif node.name not in dropped:
            b.copy(node, graph)
    return b.build(graph.outputs)


def _bias_add(graph: Graph, mm: Node, consumers: dict[str, list[Node]]) -> Node | None:
    users = consumers.get(mm.outputs[0], [])
    if len(users) != 1 or mm.outputs[0] in graph.outputs or users[0].op != "add":
        return None
    add = users[0]
    other = [i for i in add.inputs if i != mm.outputs[0]]
    n = graph.constants[mm.inputs[1]].shape[1]
    if len(other) != 1 or other[0] not in graph.constants or graph.constants[other[0]].shape != (n,):
        return None
    return add


def _emit(b: GraphBuilder, graph: Graph, siblings: list[Node], adds: list[Node] | None,
          fired: list[str] | None) -> None:
    weights = [graph.constants[mm.inputs[1]] for mm in siblings]
    first = siblings[0]
    merged = b.add("matmul", [first.inputs[0], b.constant(np.concatenate(weights, axis=1), f"{first.name}_merged_w")],
                   dict(first.attr_dict), name=f"{first.name}_merged")  # an accumulate attr, shared by the family
    finals = [mm.outputs[0] for mm in siblings]
    if adds is not None:
        bias = np.concatenate([graph.constants[next(i for i in a.inputs if i in graph.constants)] for a in adds])
        merged = b.add("add", [merged, b.constant(bias, f"{first.name}_merged_b")], name=f"{first.name}_merged_bias")
        finals = [a.outputs[0] for a in adds]
    shape = b.type_of(merged).shape
    offset = 0
    for mm, w, final in zip(siblings, weights, finals):
        begin = [0] * (len(shape) - 1) + [offset]
        end = list(shape[:-1]) + [offset + w.shape[1]]
        b.add("slice", [merged], {"begin": begin, "end": end, "steps": [1] * len(shape)}, name=f"{mm.name}_slice",
              outputs=[final])
        offset += w.shape[1]
    if fired is not None:
        fired.append(f"merge_sibling_matmuls: {', '.join(mm.name for mm in siblings)} into one GEMM "
                     f"(N = {offset}){' with their bias adds' if adds else ''}")


__all__ = ["merge_sibling_matmuls"]
