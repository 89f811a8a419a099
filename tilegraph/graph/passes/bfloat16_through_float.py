"""bfloat16_through_float: no kernel sees bfloat16. Operators on bfloat16 compute in float32 over
the tensors' bits, exactly as the ONNX reference does (widen exactly, round once to nearest even):

    widen(x)   = bitcast(shl(cast(bitcast(x, uint16), uint32), 16), float32)
    narrow(f)  = bitcast(cast(where(isnan(f), 0x7FC0, (u + 0x7FFF + ((u >> 16) & 1)) >> 16), uint16), bfloat16)
                 with u = bitcast(f, uint32)

Data movement (reshape, transpose, slice, gather, concat, where, ...) moves the uint16 bits as
they are. Every bitcast is an alias of its input's bytes (graph/ops/shape.py), so the only
kernels added are the integer widening and rounding, which fuse with their neighbours.

before:   y: bfloat16 = add(a: bfloat16, b: bfloat16)
after:    y = narrow(add(widen(a), widen(b)))
before:   y: bfloat16 = transpose(x: bfloat16)
after:    y = bitcast(transpose(bitcast(x, uint16)), bfloat16)
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

_MOVES_BITS = frozenset({"reshape", "identity", "transpose", "concat", "slice", "gather", "gather_elements", "expand",
                         "where"})


def _touches(node: Node, graph: Graph) -> bool:
    return node.op != "bitcast" and any(t and graph.values[t].dtype == "bfloat16" for t in (*node.inputs, *node.outputs))


def widen(b: GraphBuilder, x: str, name: str) -> str:
    bits = b.add("cast", [b.add("bitcast", [x], {"to": "uint16"}, f"{name}_bits")], {"to": "uint32"}, f"{name}_u32")
    high = b.add("shl", [bits, b.constant(np.array(16, np.uint32), f"{name}_16")], name=f"{name}_high")
    return b.add("bitcast", [high], {"to": "float32"}, f"{name}_float")


def narrow(b: GraphBuilder, f: str, name: str, out: str) -> str:
    def u32(value: int, label: str) -> str:
        return b.constant(np.array(value, np.uint32), f"{name}_{label}")

    u = b.add("bitcast", [f], {"to": "uint32"}, f"{name}_u32")
    odd = b.add("bitand", [b.add("shr", [u, u32(16, "16")], name=f"{name}_upper"), u32(1, "one")], name=f"{name}_odd")
    biased = b.add("add", [b.add("add", [u, u32(0x7FFF, "half")], name=f"{name}_half_up"), odd], name=f"{name}_even")
    rounded = b.add("shr", [biased, u32(16, "16b")], name=f"{name}_rounded")
    quiet = b.add("where", [b.add("isnan", [f], name=f"{name}_nan"), u32(0x7FC0, "qnan"), rounded], name=f"{name}_bits")
    half = b.add("cast", [quiet], {"to": "uint16"}, f"{name}_u16")
    return b.add("bitcast", [half], {"to": "bfloat16"}, f"{name}_bf16", outputs=[out])


def bfloat16_through_float(graph: Graph, fired: list[str] | None = None) -> Graph:
    if not any(_touches(node, graph) for node in graph.nodes):
        return graph
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        if not _touches(node, graph):
            b.copy(node, graph, rename)
            continue
        bits = node.op in _MOVES_BITS
        inputs = []
        for i in node.inputs:
            source = rename.get(i, i)
            if i and graph.values[i].dtype == "bfloat16":
                source = (b.add("bitcast", [source], {"to": "uint16"}, f"{node.name}_in_bits") if bits
                          else widen(b, source, f"{node.name}_in"))
            inputs.append(source)
        attrs = dict(node.attr_dict)
        if node.op == "cast" and attrs.get("to") == "bfloat16":
            attrs["to"] = "float32"
        wide = [b.fresh(f"{out}_wide") if graph.values[out].dtype == "bfloat16" else out for out in node.outputs]
        b.add_multi(node.op, inputs, attrs, node.name, outputs=wide)
        for out, w in zip(node.outputs, wide):
            if w == out:
                continue
            if bits:
                b.add("bitcast", [w], {"to": "bfloat16"}, f"{node.name}_out_bf16", outputs=[out])
            else:
                narrow(b, w, f"{node.name}_out", out)
        if fired is not None:
            fired.append(f"bfloat16_through_float: {node.name} ({node.op}) "
                         f"{'moves uint16 bits' if bits else 'in float32'}")
    return b.build_renamed(graph.outputs, rename)
