"""gemms_read_bfloat16: the products of a float32 model (matmul, conv2d) read bfloat16 operands and
accumulate in float32; everything else (softmax, normalisations, reductions, elementwise) stays
float32. `tg.compile(model, precision="bf16")` runs it after the default pipeline.

before:   y = matmul(x, W)                                   W a float32 constant
after:    y = matmul(cast(x, bfloat16), W_bf16) {accumulate: float32}
          W_bf16 = W rounded to bfloat16 once, at compile time (half the bytes)

That is PyTorch's autocast rule for CPUs (bf16 matmul/conv, fp32 elsewhere) and what oneDNN's
bf16 fpmath mode does. The casts of activations become epilogues of their producers (a kernel
writes bfloat16) or kernels of their own; on a CPU with AVX512_BF16 the products run as
vdpbf16ps steps (lower/passes/pair_bf16_products.py), elsewhere through float32 FMAs on the
widened values. Legal everywhere: only the operands' precision changes (the accuracy gate in
graph/precision.py judges by how much). A conv2d in the NCHW layout is left alone (its kernel
has no float32 accumulation of bfloat16 operands), and so is a grouped one: a depthwise
convolution has no reduction over channels to pair, so bfloat16 would only add conversions
(MobileNet-V2 ran 16% slower with them); one operand shared by several products is converted once.

`tiles_only` (a CPU with a matrix unit for bfloat16, AMX: target.has_matrix_tiles): only the
products whose shapes fit its tiles convert (tune/gensor/matrix_tiles.fits_tiles); the others stay
float32, since these cores' vector bf16 dot product (vdpbf16ps, 32 multiply-adds a cycle) is no
faster than their float32 FMAs and the conversions only cost: ResNet-50's stem convolution (3 input
channels) took 2.76 ms in bfloat16 and 1.30 ms in float32 on a Xeon with AMX.
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node

PRODUCTS = ("matmul", "conv2d")


def _converts(graph: Graph, node: Node, tiles_only: bool = False) -> bool:
    if node.op not in PRODUCTS or node.attr("accumulate", None) is not None:
        return False
    if node.op == "conv2d" and (node.attr("layout", "NCHW") != "NHWC" or node.attr("groups", 1) != 1):
        return False
    if not all(graph.values[t].dtype == "float32" for t in node.inputs[:2]):
        return False
    if tiles_only:
        from tilegraph.tune.gensor.matrix_tiles import fits_tiles

        a, out = graph.values[node.inputs[0]].shape, graph.values[node.outputs[0]].shape
        return fits_tiles(out[-1], a[-1], "bfloat16")  # NHWC and matmul alike: channels / K last in a
    return True


def gemms_read_bfloat16(graph: Graph, fired: list[str] | None = None, tiles_only: bool = False) -> Graph:
    if not any(_converts(graph, node, tiles_only) for node in graph.nodes):
        return graph
    import ml_dtypes  # a dependency of onnx; the graph IR holds bfloat16 only with it

    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    narrow: dict[str, str] = {}  # float32 tensor -> its bfloat16 version
    for node in graph.nodes:
        if not _converts(graph, node, tiles_only):
            b.copy(node, graph, rename)
            continue
        inputs = [rename.get(i, i) for i in node.inputs]
        for position in (0, 1):
            source = inputs[position]
            if source not in narrow:
                constant = graph.constants.get(node.inputs[position])
                narrow[source] = (b.constant(np.asarray(constant).astype(ml_dtypes.bfloat16), f"{source}_bf16")
                                  if constant is not None else
                                  b.add("cast", [source], {"to": "bfloat16"}, f"{node.name}_in{position}_bf16"))
            inputs[position] = narrow[source]
        attrs = {**node.attr_dict, "accumulate": "float32"}
        b.add_multi(node.op, inputs, attrs, node.name, outputs=list(node.outputs))
        if fired is not None:
            fired.append(f"gemms_read_bfloat16: {node.name} ({node.op})")
    return b.build_renamed(graph.outputs, rename)


__all__ = ["gemms_read_bfloat16", "PRODUCTS"]
