"""pad_gemm_columns: a wide GEMM whose column count has no good tile is computed on zero-padded
constant weights, and its result sliced back.

before:   y = matmul(x, W)                       W a constant [K, N], N = 50257 (GPT-2's LM head)
after:    y = slice(matmul(x, W0), [..., 0:N])   W0 = [W | 0] of [K, N'], N' = N rounded up to 128

The tilings of a loop are its extent's divisors: 50257 = 29 x 1733 leaves Gensor and the sketches
no vector-wide tile, and the LM head ran at 23% of peak, half of GPT-2's time (the in-situ
profile, docs/performance.md). Padded, the columns split into 128-wide tiles; the extra columns
are zeros computed and dropped (N'/N - 1 extra work: 0.09% here) and the weights are padded once,
at compile time. Legal: W a 2-D float or integer constant (an int8 weight's zero point is 0, as
graph/frontends/onnx_qdq.py makes it; its epilogue reads the sliced columns); the padded columns never reach a reader (the slice
is the matmul's only consumer).
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

MIN_COLUMNS = 2048  # narrower GEMMs are cheap enough as they are
# An 8-bit product's column tail also loses its dot-product steps (int32 multiplies lane by lane):
# a QDQ ResNet-50's 2048 x 1000 classifier ran at 5% of the float32 peak, 0.28 ms of 8.6.
MIN_COLUMNS_INTEGER = 256
ALIGN = 128         # the padded column count is a multiple of this (and of every vector width)
GOOD = 64           # a column count divisible by this already tiles well


def _padded(graph: Graph, node: Node) -> int | None:
    if node.op != "matmul" or len(node.inputs) != 2:
        return None
    x, w = node.inputs
    weights = graph.constants.get(w)
    if weights is None or weights.ndim != 2 or weights.dtype.kind not in "fi" or x in graph.constants:
        return None
    columns = weights.shape[1]
    if columns < (MIN_COLUMNS if weights.dtype.kind == "f" else MIN_COLUMNS_INTEGER) or columns % GOOD == 0:
        return None
    return -(-columns // ALIGN) * ALIGN


def pad_gemm_columns(graph: Graph, fired: list[str] | None = None) -> Graph:
    widths = {node.name: n for node in graph.nodes if (n := _padded(graph, node)) is not None}
    if not widths:
        return graph
    b = GraphBuilder.like(graph)
    for node in graph.nodes:
        wide = widths.get(node.name)
        if wide is None:
            b.copy(node, graph)
            continue
        x, w = node.inputs
        weights = graph.constants[w]
        padded = np.zeros((weights.shape[0], wide), weights.dtype)
        padded[:, :weights.shape[1]] = weights
        product = b.add("matmul", [x, b.constant(padded, f"{w}_padded")], dict(node.attrs), name=node.name,
                        outputs=[b.fresh(f"{node.outputs[0]}_padded")])  # the slice keeps the output's name
        rank = len(graph.type_of(node.outputs[0]).shape)
        shape = b.type_of(product).shape
        b.add("slice", [product], {"begin": (0,) * rank, "end": (*shape[:-1], weights.shape[1]), "steps": (1,) * rank},
              name=f"{node.name}_columns", outputs=node.outputs)
        if fired is not None:
            fired.append(f"pad_gemm_columns: {node.name} ({weights.shape[1]} -> {wide} columns)")
    return b.build(graph.outputs)
