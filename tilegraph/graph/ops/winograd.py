"""Winograd convolution's transforms as graph ops (made by graph/passes/winograd_conv.py):

    v = winograd_input(x (N, H, W, C), m=4, pads=(1, 1, 1, 1), out_hw=(OH, OW))   -> (a, a, N*TH*TW, C)
    y = winograd_output(mm (a, a, N*TH*TW, K), m=4, n=N, out_hw=(OH, OW))          -> (N, OH, OW, K)

with a = m + 2 and TH, TW the m x m output tiles covering (OH, OW) (ops/winograd.py). Neither is
a tuning task: their schedule (schedule/winograd.py, every point unrolled) is the one that keeps
their C small, and the work worth tuning is the batched GEMM between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph import ops
from tilegraph.errors import GraphError
from tilegraph.graph.ir import Node, TensorType
from tilegraph.graph.ops.registry import OpDef, register, same
from tilegraph.ops import winograd
from tilegraph.testing import reference as ref


def _tile_size(node: Node) -> int:
    m = node.attr("m", 4)
    if m not in winograd.TILE_SIZES:
        raise GraphError(f"node {node.name!r} ({node.op}): m must be one of {winograd.TILE_SIZES}, got {m!r}")
    return m


@register("winograd_input", tuned=False)
class WinogradInput(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        x, m = types[0], _tile_size(node)
        if len(x.shape) != 4 or x.dtype != "float32":
            raise GraphError(f"node {node.name!r} (winograd_input) needs a 4-D float32 NHWC x, got {x}")
        oh, ow = node.attr("out_hw")
        th, tw = winograd.tiles((oh, ow), m)
        return [same(x, (m + 2, m + 2, x.shape[0] * th * tw, x.shape[3]))]

    def reference(self, node: Node, xs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [ref.winograd_input_nhwc(xs[0], _tile_size(node), node.attr("pads"), node.attr("out_hw"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.winograd_input_nhwc(args[0], _tile_size(node), node.attr("pads"), node.attr("out_hw"))]


@register("winograd_output", tuned=False)
class WinogradOutput(OpDef):
    def infer(self, node: Node, types: Sequence[TensorType | None]) -> list[TensorType]:
        mm, m = types[0], _tile_size(node)
        n, (oh, ow) = node.attr("n"), node.attr("out_hw")
        th, tw = winograd.tiles((oh, ow), m)
        if len(mm.shape) != 4 or mm.shape[:3] != (m + 2, m + 2, n * th * tw) or mm.dtype != "float32":
            raise GraphError(f"node {node.name!r} (winograd_output): mm {mm} is not ({m + 2}, {m + 2}, "
                             f"{n * th * tw}, K) float32 for n={n} images of {oh}x{ow}")
        return [same(mm, (n, oh, ow, mm.shape[3]))]

    def reference(self, node: Node, xs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [ref.winograd_output_nhwc(xs[0], _tile_size(node), node.attr("n"), node.attr("out_hw"))]

    def lower(self, node: Node, args: Sequence[Any]) -> list[Any]:
        return [ops.winograd_output_nhwc(args[0], _tile_size(node), node.attr("n"), node.attr("out_hw"))]
