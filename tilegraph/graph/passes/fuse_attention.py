"""fuse_attention: scaled dot-product attention written as separate nodes becomes one attention node.

before:   s = matmul(q, kt)                  q (*B, S, D), kt (*B, D, T)
          x = mul(s, c) | div(s, c)          optional, c a scalar constant
          y = add(x, mask)                   optional, mask broadcastable to s
          p = softmax(y, axis=-1)
          p = where(isnan(p), 0, p)          optional (torch's exporter guards fully masked rows so)
          o = matmul(p, v)                   v (*B, T, E)
after:    o = attention(q, kt, v[, mask], scale=c, divide=..., nan_to_zero=...)

One kernel then computes a block of query rows end to end (schedule/attention.py) instead of
writing the (*B, S, T) scores and probabilities to memory between three kernels. The operator
computes the same stages in the same order (ops/attention.py), so it agrees with the unfused graph
to rounding, NaN included. It fires only where every intermediate feeds the next node alone (not a
graph output, not read elsewhere), the batch axes of q, kt and v are equal (no broadcast), and the
dtype is float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node


@dataclass(frozen=True)
class _Match:
    nodes: tuple[str, ...]  # every node the attention node replaces, the final matmul last
    q: str
    kt: str
    v: str
    mask: str | None
    scale: float | None
    divide: bool
    nan_to_zero: bool


def _scalar(graph: Graph, name: str) -> float | None:
    value = graph.constants.get(name)
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(-1)[0])


def _match(graph: Graph, out: Node, producers: dict[str, Node], consumers: dict[str, list[Node]]) -> _Match | None:
    if out.op != "matmul" or len(out.inputs) != 2:
        return None

    def sole(tensor: str, count: int = 1) -> Node | None:
        """The producer of `tensor` when `count` nodes read it and it is not a graph output."""
        node = producers.get(tensor)
        if node is None or tensor in graph.outputs or len(consumers.get(tensor, ())) != count:
            return None
        return node

    probs, v = out.inputs
    node = sole(probs)
    taken: list[str] = []
    nan_to_zero = False
    if node is not None and node.op == "where":
        cond, zero, soft_out = node.inputs
        isnan = sole(cond)
        if isnan is None or isnan.op != "isnan" or isnan.inputs[0] != soft_out or _scalar(graph, zero) != 0.0:
            return None
        taken += [node.name, isnan.name]
        nan_to_zero = True
        node = sole(soft_out, 2)
    if node is None or node.op != "softmax":
        return None
    rank = len(graph.type_of(node.outputs[0]).shape)
    if node.attr("axis", -1) not in (-1, rank - 1):
        return None
    taken.append(node.name)
    node = sole(node.inputs[0])
    mask = None
    if node is not None and node.op == "add":
        a, b = node.inputs
        scores_type = graph.type_of(node.outputs[0])
        # the scores are the operand a (scaled) product made; the mask the other, broadcast into them
        made = [(x, y) for x, y in ((a, b), (b, a)) if graph.type_of(x) == scores_type
                and getattr(sole(x), "op", None) in ("matmul", "mul", "div")]
        if not made:
            return None
        first, mask = made[0]
        taken.append(node.name)
        node = sole(first)
    scale, divide = None, False
    if node is not None and node.op in ("mul", "div"):
        a, b = node.inputs
        scores, c = (a, _scalar(graph, b)) if _scalar(graph, b) is not None or node.op == "div" else (b, _scalar(graph, a))
        if c is None or graph.type_of(scores) != graph.type_of(node.outputs[0]):
            return None
        scale, divide = c, node.op == "div"
        taken.append(node.name)
        node = sole(scores)
    if node is None or node.op != "matmul" or len(node.inputs) != 2:
        return None
    q, kt = node.inputs
    types = [graph.type_of(t) for t in (q, kt, v)]
    if any(t.dtype != np.dtype("float32") or len(t.shape) < 2 for t in types):
        return None
    if not (types[0].shape[:-2] == types[1].shape[:-2] == types[2].shape[:-2]):
        return None
    if types[0].shape[-1] != types[1].shape[-2] or types[1].shape[-1] != types[2].shape[-2]:
        return None
    taken.append(node.name)
    return _Match((*reversed(taken), out.name), q, kt, v, mask, scale, divide, nan_to_zero)


def fuse_attention(graph: Graph, fired: list[str] | None = None) -> Graph:
    producers = {t: n for n in graph.nodes for t in n.outputs}
    consumers: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for t in set(n.inputs):
            consumers.setdefault(t, []).append(n)
    matches: dict[str, _Match] = {}
    replaced: set[str] = set()
    for node in graph.nodes:
        m = _match(graph, node, producers, consumers)
        if m is not None and not replaced & set(m.nodes):
            matches[node.name] = m
            replaced |= set(m.nodes)
    if not matches:
        return graph
    b = GraphBuilder.like(graph)
    for node in graph.nodes:
        m = matches.get(node.name)
        if m is not None:
            attrs = {"divide": m.divide, "nan_to_zero": m.nan_to_zero, **({"scale": m.scale} if m.scale is not None else {})}
            inputs = [m.q, m.kt, m.v, *([m.mask] if m.mask is not None else [])]
            b.add("attention", inputs, attrs, name=node.name, outputs=node.outputs)
            if fired is not None:
                fired.append(f"fuse_attention: {', '.join(m.nodes)}")
        elif node.name not in replaced:
            b.copy(node, graph)
    return b.build(graph.outputs)
