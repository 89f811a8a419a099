"""winograd_conv: a channels-last 3x3 convolution of stride 1 as Winograd's F(m x m, 3 x 3)
(Lavin & Gray 2016; ops/winograd.py): two cheap transforms around a batched GEMM that does
(m + 2)² / (9 m²) of the direct convolution's products (F(4x4): 4x fewer, F(2x2): 2.25x fewer).

before:   y = conv2d(x, w (3, 3, C, K), b, layout="NHWC", strides=(1, 1), pads=p)
after:    v = winograd_input(x, m=4, pads=p, out_hw=(OH, OW))       (6, 6, T, C)   T = N * TH * TW tiles
          u = G w Gᵀ                                                (6, 6, C, K)   folded at compile time
          y = add(winograd_output(matmul(v, u), m=4, n=N, out_hw=(OH, OW)), b)

Legal: NHWC, one group, no dilation, float32 with constant weights (and bias); any padding (the
input transform reads zeros outside x). Where it pays: the transformed weights are (m + 2)²/9
times the original ones and each is read once per tile, so a convolution with few tiles turns
into a GEMM bound by reading them. m is the largest of TILE_SIZES leaving at least MIN_TILES
tiles (the GEMM then does at least MIN_TILES / 2 = 16 FLOP per byte of transformed weights, over
twice the DRAM balance of the Zen 5 measured below: 547 GFLOP/s over 77 GB/s), none when no m does;
a run-time batch counts at its lower bound (a call may bring one image: graph/dims.least_shape);
MIN_CHANNELS keeps the transforms' additions small beside the products (they cost per element
what the GEMM costs per channel). Measured alone (constructed kernels, AMD EPYC Zen 5, 2 threads,
ms direct -> Winograd): 56x56x64 0.51 -> 0.24 (F4), 28x28x128 0.49 -> 0.19 (F4), 14x14x256 0.49 ->
0.27 (F2; F4 with 16 tiles 0.53), 7x7x512 0.48 -> 1.05 (F2, 16 tiles: left direct).
The rounding differs from the direct sum's: F(4x4)'s transforms scale values by up to 4x and
1/24 (measured ~1e-5 relative on random inputs against ~1e-6 direct); F(2x2)'s is as exact.
"""

from __future__ import annotations

import math

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.dims import least_shape
from tilegraph.graph.ir import Graph, Node
from tilegraph.graph.passes.common import dense_nhwc_conv
from tilegraph.ops import winograd

TILE_SIZES = (4, 2)  # m, the first with enough tiles: F(4x4) does 4x fewer products, F(2x2) 2.25x
MIN_TILES = 32
MIN_CHANNELS = 16


def _tile_size(graph: Graph, node: Node) -> int | None:
    """The output tile m this convolution is computed with (the largest with enough tiles), or None."""
    if not dense_nhwc_conv(graph, node) or tuple(node.attr("strides", (1, 1))) != (1, 1):
        return None
    x, w = graph.type_of(node.inputs[0]), graph.type_of(node.inputs[1])
    _, oh, ow, k = graph.type_of(node.outputs[0]).shape
    n = least_shape(graph, node.outputs[0])[0]  # a run-time batch: its lower bound (one image may be all)
    if x.dtype != "float32" or w.dtype != "float32" or tuple(w.shape[:2]) != (3, 3) \
            or min(w.shape[2], k) < MIN_CHANNELS:
        return None
    return next((m for m in TILE_SIZES if n * math.prod(winograd.tiles((oh, ow), m)) >= MIN_TILES), None)


def winograd_conv(graph: Graph, fired: list[str] | None = None) -> Graph:
    chosen = {node.outputs[0]: m for node in graph.nodes if (m := _tile_size(graph, node))}
    if not chosen:
        return graph
    b = GraphBuilder.like(graph)
    for node in graph.nodes:
        m = chosen.get(node.outputs[0]) if node.outputs else None
        if m is None:
            b.copy(node, graph)
            continue
        n, oh, ow, _ = graph.type_of(node.outputs[0]).shape
        top, left, bottom, right = (int(p) for p in node.attr("pads", (0, 0, 0, 0)))
        pads, out_hw = (top, left, bottom, right), (int(oh), int(ow))
        v = b.add("winograd_input", [node.inputs[0]], {"m": m, "pads": pads, "out_hw": out_hw},
                  f"{node.name}_winograd_in")
        u = b.constant(winograd.transform_weights(graph.constants[node.inputs[1]], m).astype(np.float32),
                       f"{node.name}_winograd_w")
        mm = b.add("matmul", [v, u], {}, f"{node.name}_winograd_gemm")
        has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
        attrs = {"m": m, "n": int(n), "out_hw": out_hw}
        if has_bias:
            y = b.add("winograd_output", [mm], attrs, f"{node.name}_winograd_out")
            b.add_multi("add", [y, node.inputs[2]], {}, node.name, outputs=node.outputs)
        else:
            b.add_multi("winograd_output", [mm], attrs, node.name, outputs=node.outputs)
        if fired is not None:
            fired.append(f"winograd_conv: {node.name} as F({m}x{m}, 3x3)")
    return b.build(graph.outputs)
