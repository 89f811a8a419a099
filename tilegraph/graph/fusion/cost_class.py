"""cost_class: candidates that run in the same time, whatever values their scalar constants hold.

    cost_class(graph, group) -> str     # equal for groups measured once for all

A kernel's scalar constants are folded into its code (a QuantizeLinear's scale, a zero point), so
twelve BERT layers whose quantization scales differ give twelve workloads, twelve binaries and
twelve measurements of what is one cost. Two groups are in one class when their nodes, attributes,
tensor types and wiring are the same and each scalar constant is the same "kind" of value (0, 1,
or another: the special values are the ones simplification folds away); larger constants are kernel
arguments, their values never change the code. Orchestration measures one candidate per class and
gives its cost to the rest (each is still built, from its own constants, where it is chosen).

    layer 3: [matmul, sub(.., 17), cast, mul(.., 0.0123)]   } one class:
    layer 7: [matmul, sub(.., 21), cast, mul(.., 0.0098)]   } one measurement
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from tilegraph.graph.fusion.partition import Group
from tilegraph.graph.ir import Graph


def cost_class(graph: Graph, group: Group) -> str:
    nodes = {n.name: n for n in graph.nodes}
    local: dict[str, str] = {}  # tensor -> its name inside the group's description

    def name_of(tensor: str) -> str:
        if not tensor:
            return "-"
        if tensor not in local:
            if tensor in graph.constants:
                value = graph.constants[tensor]
                local[tensor] = f"c{len(local)}:{value.dtype}{list(value.shape)}:{_kind(value)}"
            else:
                t = graph.type_of(tensor)
                local[tensor] = f"x{len(local)}:{t.dtype}{list(t.shape)}"
        return local[tensor].split(":")[0]

    described = []
    for position, member in enumerate(group.nodes):
        node = nodes[member]
        ins = [name_of(t) for t in node.inputs]
        outs = []
        for o in node.outputs:
            t = graph.type_of(o)
            local[o] = f"n{position}.{len(outs)}"
            outs.append(f"{t.dtype}{list(t.shape)}")
        described.append([node.op, repr(node.attrs), ins, outs])
    anchor = group.nodes.index(group.anchor) if group.anchor is not None else -1
    text = json.dumps([described, sorted(local.values()), anchor, local.get(group.output, group.output),
                       [group.nodes.index(m) for m in group.epilogue_path if m in group.nodes]])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _kind(value: np.ndarray) -> str:
    if value.size != 1:
        return "array"
    v = value.reshape(()).item()
    return repr(v) if v in (0, 1, -1) else "scalar"


__all__ = ["cost_class"]
