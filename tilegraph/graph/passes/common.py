"""What several graph passes ask of a node (one implementation each)."""

from __future__ import annotations

from tilegraph.graph.ir import Graph, Node


def dense_nhwc_conv(graph: Graph, node: Node) -> bool:
    """A channels-last conv2d with one group, no dilation, constant weights (and bias), computed
    as plain products: no integer accumulation, no border value other than zero. The convolutions
    conv_to_gemm and winograd_conv may rewrite (a QDQ model's integer convolution is not one)."""
    if node.op != "conv2d" or node.attr("layout", "NCHW") != "NHWC" or node.attr("groups", 1) != 1:
        return False
    if tuple(node.attr("dilations", (1, 1))) != (1, 1) or node.attr("accumulate", None) or node.attr("pad_value", 0):
        return False
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    return node.inputs[1] in graph.constants and (not bias or bias in graph.constants)
