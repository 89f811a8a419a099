"""pow_to_multiply: a power by a constant exponent of 2 or 3 becomes multiplications.

before:   y = pow(x, 3.0)           the exponent a float constant whose every element is 3 (or 2)
after:    t = mul(x, x); y = mul(t, x)

A power is a libm call per element; GPT-2's GELU (0.5 x (1 + tanh(c (x + 0.044715 x^3)))) spent
17 ms of a 167 ms untuned model in it (the in-situ profile, docs/performance.md); two multiplies
vectorise. Legal where the result keeps x's shape and dtype (an exponent that broadcasts x to a
larger shape is left alone). x * x * x rounds twice where powf rounds once: within 2 ulp of it,
with the same infinities and NaNs.
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

SMALL_POWERS = (2, 3)


def _power(graph: Graph, node: Node) -> int | None:
    """The small integer power `node` raises its first input to, or None."""
    if node.op != "pow" or len(node.inputs) != 2:
        return None
    x, e = node.inputs
    exponent = graph.constants.get(e)
    if exponent is None or exponent.dtype.kind != "f" or exponent.size == 0 or x in graph.constants:
        return None
    first = float(exponent.reshape(-1)[0])
    if first not in SMALL_POWERS or not np.all(exponent == first):
        return None
    if graph.type_of(node.outputs[0]) != graph.type_of(x):  # the exponent broadcasts x: not just x's powers
        return None
    return int(first)


def pow_to_multiply(graph: Graph, fired: list[str] | None = None) -> Graph:
    powers = {node.name: p for node in graph.nodes if (p := _power(graph, node)) is not None}
    if not powers:
        return graph
    b = GraphBuilder.like(graph)
    for node in graph.nodes:
        power = powers.get(node.name)
        if power is None:
            b.copy(node, graph)
            continue
        x = node.inputs[0]
        if power == 2:
            b.add("mul", [x, x], name=node.name, outputs=node.outputs)
        else:
            square = b.add("mul", [x, x], name=f"{node.name}_square", outputs=[b.fresh(f"{node.outputs[0]}_square")])
            b.add("mul", [square, x], name=node.name, outputs=node.outputs)
        if fired is not None:
            fired.append(f"pow_to_multiply: {node.name} (x^{power})")
    return b.build(graph.outputs)
