"""Graph passes, one per file, each a function Graph -> Graph (before/after in its docstring).

    graph, fired = optimize(graph)    # the default pipeline; `fired` says which rule fired where
    graph, fired = optimize(graph, extra=("conv_to_gemm",))   # with optional rules (OPTIONAL)

An optional rule is legal everywhere it fires but not on by default because it was measured
slower end to end under default schedules (docs/graph.md says where and by how much).
"""

from __future__ import annotations

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Graph
from tilegraph.graph.passes.conv_to_gemm import conv_to_gemm
from tilegraph.graph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from tilegraph.graph.passes.eliminate_dead_code import eliminate_dead_code
from tilegraph.graph.passes.fold_batch_norm import fold_batch_norm
from tilegraph.graph.passes.fold_constants import fold_constants
from tilegraph.graph.passes.fold_scale_into_weights import fold_scale_into_weights
from tilegraph.graph.passes.merge_sibling_matmuls import merge_sibling_matmuls
from tilegraph.graph.passes.sink_transposes import sink_transposes
from tilegraph.graph.passes.to_channels_last import to_channels_last

PIPELINE = (fold_constants, eliminate_dead_code, eliminate_common_subexpressions, fold_batch_norm,
            to_channels_last, fold_constants, sink_transposes, fold_constants, eliminate_common_subexpressions,
            fold_scale_into_weights, merge_sibling_matmuls, eliminate_dead_code)


OPTIONAL = {"conv_to_gemm": conv_to_gemm}  # run after the layout pass and its constant folding


def optimize(graph: Graph, extra: tuple[str, ...] | list[str] = ()) -> tuple[Graph, list[str]]:
    unknown = [name for name in extra if name not in OPTIONAL]
    if unknown:
        raise GraphError(f"unknown optional rewrite(s) {', '.join(unknown)}; known: {', '.join(OPTIONAL)}")
    fired: list[str] = []
    for position, graph_pass in enumerate(PIPELINE):
        graph = graph_pass(graph, fired)
        if position == PIPELINE.index(to_channels_last) + 1:
            for name in extra:
                graph = OPTIONAL[name](graph, fired)
    return graph.verify(), fired


__all__ = ["optimize", "PIPELINE", "fold_constants", "eliminate_dead_code", "eliminate_common_subexpressions",
           "fold_batch_norm", "to_channels_last", "sink_transposes", "merge_sibling_matmuls", "conv_to_gemm",
           "fold_scale_into_weights",
           "OPTIONAL"]
