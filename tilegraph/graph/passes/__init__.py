"""Graph passes, one per file, each a function Graph -> Graph (before/after in its docstring).

    graph, fired = optimize(graph)    # the default pipeline; `fired` says which rule fired where
"""

from __future__ import annotations

from tilegraph.graph.ir import Graph
from tilegraph.graph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from tilegraph.graph.passes.eliminate_dead_code import eliminate_dead_code
from tilegraph.graph.passes.fold_batch_norm import fold_batch_norm
from tilegraph.graph.passes.fold_constants import fold_constants
from tilegraph.graph.passes.merge_sibling_matmuls import merge_sibling_matmuls
from tilegraph.graph.passes.sink_transposes import sink_transposes
from tilegraph.graph.passes.to_channels_last import to_channels_last

PIPELINE = (fold_constants, eliminate_dead_code, eliminate_common_subexpressions, fold_batch_norm,
            to_channels_last, fold_constants, sink_transposes, fold_constants, eliminate_common_subexpressions,
            merge_sibling_matmuls, eliminate_dead_code)


def optimize(graph: Graph) -> tuple[Graph, list[str]]:
    fired: list[str] = []
    for graph_pass in PIPELINE:
        graph = graph_pass(graph, fired)
    return graph.verify(), fired


__all__ = ["optimize", "PIPELINE", "fold_constants", "eliminate_dead_code", "eliminate_common_subexpressions",
           "fold_batch_norm", "to_channels_last", "sink_transposes", "merge_sibling_matmuls"]
