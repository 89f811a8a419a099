"""run_reference: a graph evaluated node by node with each op's numpy reference (float64 inside).

    outs = run_reference(graph, {"x": x})     # {output name: array in the declared dtype}

The meaning of a graph, as the interpreter is the meaning of the loop IR: constant folding uses
the same references, and tests compare compiled models against it (and against ONNX Runtime).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Graph
from tilegraph.graph.ops.registry import reference_outputs


def run_reference(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    missing = [n for n in graph.inputs if n not in inputs]
    if missing:
        raise GraphError(f"graph {graph.name!r} needs inputs {missing}")
    env: dict[str, np.ndarray] = dict(graph.constants)
    for name in graph.inputs:
        expected = graph.values[name]
        array = np.asarray(inputs[name])
        if array.shape != expected.shape:
            raise GraphError(f"input {name!r} has shape {array.shape}, the graph takes {expected}")
        env[name] = array.astype(expected.dtype, copy=False)
    last_use = {}
    for position, node in enumerate(graph.nodes):
        for name in node.inputs:
            last_use[name] = position
    keep = set(graph.outputs) | set(graph.constants) | set(graph.inputs)
    for position, node in enumerate(graph.nodes):
        args = [env[i] if i else None for i in node.inputs]
        outs = reference_outputs(node, args, [graph.values[o] for o in node.outputs])
        env.update(zip(node.outputs, outs))
        for name in node.inputs:  # free intermediates early: full models hold hundreds of MB
            if name and last_use.get(name) == position and name not in keep:
                env.pop(name, None)
    return {name: env[name] for name in graph.outputs}


__all__ = ["run_reference"]
