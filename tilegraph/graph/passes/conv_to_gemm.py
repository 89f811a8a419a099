"""conv_to_gemm: a channels-last convolution that is a matrix product in disguise becomes one
(OLLIE's derivation rules, as fixed rewrites): a 1x1 convolution, and a patch embedding (a
convolution whose stride equals its kernel).

before (1x1, stride s):   y = conv2d(x, w (1, 1, C, O), b, layout="NHWC", strides=(s, s))
after:                    y = reshape(add(matmul(reshape(slice(x, ::s, ::s), (N, OH*OW, C)),
                                                 w (C, O)), b), (N, OH, OW, O))
before (patch k x k):     y = conv2d(x, w (k, k, C, O), b, layout="NHWC", strides=(k, k))
after:                    p = transpose(reshape(x, (N, OH, k, OW, k, C)), (0, 1, 3, 2, 4, 5))
                          y = reshape(add(matmul(reshape(p, (N, OH*OW, k*k*C)), w (k*k*C, O)), b), (N, OH, OW, O))

Legal: NHWC, one group, no dilation, no padding, constant weights (and bias), float products
(passes/common.py dense_nhwc_conv: a QDQ model's integer convolution keeps its accumulation). The weight reshape
is exact because HWIO flattens in (kh, kw, c) order, the order of the patch's elements. Rows
past the last full window are sliced off first. The reshapes are views and the slice and
transpose fuse into the GEMM as prologues, so no data moves that the convolution did not move.
"""

from __future__ import annotations

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node
from tilegraph.graph.passes.common import dense_nhwc_conv


def _rule(graph: Graph, node: Node) -> str | None:
    """Which rewrite applies to `node` ("1x1" or "patch"), or None."""
    if not dense_nhwc_conv(graph, node) or any(node.attr("pads", (0, 0, 0, 0))):
        return None
    kh, kw = graph.type_of(node.inputs[1]).shape[:2]
    if (kh, kw) == (1, 1) and tuple(node.attr("strides", (1, 1))) == (1, 1):
        return "1x1"
    if tuple(node.attr("strides", (1, 1))) == (kh, kw):
        return "patch"
    return None


def conv_to_gemm(graph: Graph, fired: list[str] | None = None) -> Graph:
    rules = {node.outputs[0]: rule for node in graph.nodes if (rule := _rule(graph, node))}
    if not rules:
        return graph
    b = GraphBuilder.like(graph)
    for node in graph.nodes:
        rule = rules.get(node.outputs[0]) if node.outputs else None
        if rule is None:
            b.copy(node, graph)
            continue
        x, w = node.inputs[0], graph.constants[node.inputs[1]]
        n, h, wd, c = graph.type_of(x).shape
        kh, kw, _, o = w.shape
        _, oh, ow, _ = graph.type_of(node.outputs[0]).shape
        sh, sw = node.attr("strides", (1, 1))
        step = (1, 1) if rule == "patch" else (sh, sw)
        used = (oh * kh, ow * kw) if rule == "patch" else (h, wd)
        if step != (1, 1) or used != (h, wd):  # strided 1x1, or a patch grid leaving rows over
            x = b.add("slice", [x], {"begin": (0, 0, 0, 0), "end": (n, used[0], used[1], c),
                                     "steps": (1, *step, 1)}, f"{node.name}_rows")
        if rule == "patch":
            x = b.add("reshape", [x], {"shape": (n, oh, kh, ow, kw, c)}, f"{node.name}_grid")
            x = b.add("transpose", [x], {"perm": (0, 1, 3, 2, 4, 5)}, f"{node.name}_patches")
        rows = b.add("reshape", [x], {"shape": (n, oh * ow, kh * kw * c)}, f"{node.name}_rows2d")
        weight = b.constant(w.reshape(kh * kw * c, o), f"{node.name}_w2d")
        y = b.add("matmul", [rows, weight], {}, f"{node.name}_gemm")
        if len(node.inputs) > 2 and node.inputs[2]:
            y = b.add("add", [y, node.inputs[2]], {}, f"{node.name}_bias")
        b.add_multi("reshape", [y], {"shape": (n, oh, ow, o)}, node.name, outputs=node.outputs)
        if fired is not None:
            fired.append(f"conv_to_gemm: {node.name} ({rule} convolution) as a GEMM")
    return b.build(graph.outputs)
