"""Graph passes, one per file, each a function Graph -> Graph (before/after in its docstring).

    graph, fired = optimize(graph)    # the default pipeline; `fired` says which rule fired where
    graph, fired = optimize(graph, extra=("conv_to_gemm",))   # with optional rules (OPTIONAL)
    graph = optimize_float32_cpu(graph, fired, skip=())     # FLOAT32_CPU, where compile_model runs them
    TILEGRAPH_VERIFY=1                # Graph.verify after every pass (the test suite sets it)

An optional rule is legal everywhere it fires but not on by default because it was measured
slower end to end under default schedules (docs/graph.md says where and by how much).
"""

from __future__ import annotations

import os

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Graph
from tilegraph.graph.passes.bfloat16_through_float import bfloat16_through_float
from tilegraph.graph.passes.compute_half_in_float import compute_half_in_float
from tilegraph.graph.passes.conv_to_gemm import conv_to_gemm
from tilegraph.graph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from tilegraph.graph.passes.eliminate_dead_code import eliminate_dead_code
from tilegraph.graph.passes.empty_tensors_as_constants import empty_tensors_as_constants
from tilegraph.graph.passes.fold_batch_norm import fold_batch_norm
from tilegraph.graph.passes.fold_constants import fold_constants
from tilegraph.graph.passes.fold_scale_into_weights import fold_scale_into_weights
from tilegraph.graph.passes.fuse_attention import fuse_attention
from tilegraph.graph.passes.merge_sibling_matmuls import merge_sibling_matmuls
from tilegraph.graph.passes.pad_gemm_columns import pad_gemm_columns
from tilegraph.graph.passes.pow_to_multiply import pow_to_multiply
from tilegraph.graph.passes.sink_transposes import sink_transposes
from tilegraph.graph.passes.to_channels_last import to_channels_last
from tilegraph.graph.passes.winograd_conv import winograd_conv

PIPELINE = (empty_tensors_as_constants, bfloat16_through_float, compute_half_in_float, fold_constants, eliminate_dead_code,
            eliminate_common_subexpressions, fold_batch_norm,
            to_channels_last, fold_constants, sink_transposes, fold_constants, eliminate_common_subexpressions,
            fold_scale_into_weights, merge_sibling_matmuls, pow_to_multiply, pad_gemm_columns, eliminate_dead_code,
            empty_tensors_as_constants)  # again: merged empty constants come back as identities of graph outputs


OPTIONAL = {"conv_to_gemm": conv_to_gemm, "fuse_attention": fuse_attention}  # run after the layout pass and its constant folding
# Rewrites on by default for float32 models on CPU targets, after the precision passes (a bfloat16
# or int8 product of transformed values would lose what the transforms amplify); each can be
# turned off (compile_model(skip_rewrites=...), `tilegraph compile --no-rewrite NAME`)
FLOAT32_CPU = {"winograd_conv": winograd_conv}
VERIFY_ENV = "TILEGRAPH_VERIFY"


def optimize(graph: Graph, extra: tuple[str, ...] | list[str] = ()) -> tuple[Graph, list[str]]:
    unknown = [name for name in extra if name not in OPTIONAL]
    if unknown:
        raise GraphError(f"unknown optional rewrite(s) {', '.join(unknown)}; known: {', '.join(OPTIONAL)}")
    fired: list[str] = []
    verify_each = os.environ.get(VERIFY_ENV, "") not in ("", "0")
    for position, graph_pass in enumerate(PIPELINE):
        graph = _checked(graph_pass, graph_pass(graph, fired), verify_each)
        if position == PIPELINE.index(to_channels_last) + 1:
            for name in extra:
                graph = _checked(OPTIONAL[name], OPTIONAL[name](graph, fired), verify_each)
    return graph.verify(), fired


def optimize_float32_cpu(graph: Graph, fired: list[str], skip: tuple[str, ...] | list[str] = ()) -> Graph:
    """The FLOAT32_CPU rewrites but those named in `skip`, then dead constants dropped."""
    unknown = [name for name in skip if name not in FLOAT32_CPU]
    if unknown:
        raise GraphError(f"unknown default rewrite(s) {', '.join(unknown)}; known: {', '.join(FLOAT32_CPU)}")
    verify_each = os.environ.get(VERIFY_ENV, "") not in ("", "0")
    for name, rewrite in FLOAT32_CPU.items():
        if name not in skip:
            graph = _checked(rewrite, rewrite(graph, fired), verify_each)
    return eliminate_dead_code(graph).verify()


def _checked(graph_pass: object, graph: Graph, verify: bool) -> Graph:
    """With TILEGRAPH_VERIFY=1 (the test suite sets it), every pass's result is verified, so a pass
    that breaks an invariant is named rather than a later one."""
    if not verify:
        return graph
    try:
        return graph.verify()
    except GraphError as e:
        raise GraphError(f"graph pass {getattr(graph_pass, '__name__', graph_pass)} produced an invalid graph: {e}") from None


__all__ = ["optimize", "PIPELINE", "fold_constants", "eliminate_dead_code", "eliminate_common_subexpressions",
           "fold_batch_norm", "to_channels_last", "sink_transposes", "merge_sibling_matmuls", "conv_to_gemm",
           "fold_scale_into_weights", "fuse_attention", "compute_half_in_float", "empty_tensors_as_constants",
           "bfloat16_through_float", "winograd_conv", "optimize_float32_cpu",
           "OPTIONAL", "FLOAT32_CPU"]
