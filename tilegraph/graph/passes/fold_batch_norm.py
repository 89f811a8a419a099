"""fold_batch_norm: an inference batch_norm after a conv2d with constant weights is folded into
the conv's weights and bias (the batch_norm must be the conv output's only reader).

before:   y = conv2d(x, w); z = batch_norm(y, scale, bias, mean, var, epsilon=e)
after:    z = conv2d(x, w * s, (b0 - mean) * s + bias)     s = scale / sqrt(var + e), per output channel
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph


def fold_batch_norm(graph: Graph, fired: list[str] | None = None) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()
    # keyed by output tensor (unique in a graph; node names need not be): batch_norm output -> (conv, w, b)
    folds: dict[str, tuple] = {}
    for node in graph.nodes:
        if node.op != "batch_norm" or not all(i in graph.constants for i in node.inputs[1:]):
            continue
        conv = producers.get(node.inputs[0])
        if conv is None or conv.op != "conv2d" or conv.inputs[1] not in graph.constants:
            continue
        if len(consumers.get(node.inputs[0], [])) != 1 or node.inputs[0] in graph.outputs:
            continue
        if (len(conv.inputs) > 2 and conv.inputs[2] not in graph.constants) or node.attr("axis", 1) != (
                1 if conv.attr("layout", "NCHW") == "NCHW" else 3):
            continue
        scale, bias, mean, var = (graph.constants[i].astype(np.float64) for i in node.inputs[1:])
        s = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
        w = graph.constants[conv.inputs[1]].astype(np.float64)
        w = w * (s.reshape(-1, 1, 1, 1) if conv.attr("layout", "NCHW") == "NCHW" else s)
        b0 = graph.constants[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 else 0.0
        dtype = graph.constants[conv.inputs[1]].dtype
        folds[node.outputs[0]] = (conv, w.astype(dtype), ((b0 - mean) * s + bias).astype(dtype))
    if not folds:
        return graph
    folded_convs = {conv.outputs[0]: (bn, w, b) for bn, (conv, w, b) in folds.items()}
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        if node.outputs[0] in folds:
            conv = folds[node.outputs[0]][0]
            rename[node.outputs[0]] = rename.get(conv.outputs[0], conv.outputs[0])
            continue
        if node.outputs and node.outputs[0] in folded_convs:
            bn_output, w, bias = folded_convs[node.outputs[0]]
            inputs = [rename.get(node.inputs[0], node.inputs[0]), b.constant(w, f"{node.name}_w_bn"),
                      b.constant(bias, f"{node.name}_b_bn")]
            b.add_multi("conv2d", inputs, node.attr_dict, node.name, outputs=node.outputs)
            if fired is not None:
                fired.append(f"fold_batch_norm: the norm giving {bn_output} into {node.name}")
            continue
        b.copy(node, graph, rename)
    return b.build_renamed(graph.outputs, rename)
