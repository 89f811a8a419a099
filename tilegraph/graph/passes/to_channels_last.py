"""to_channels_last: NCHW convolutions, pools and batch norms run in NHWC between transposes;
`sink_transposes` then cancels the transposes between neighbouring layers, so only the model's
boundaries transpose.

before:   y = conv2d(x, w, layout="NCHW")                       w (O, I, KH, KW)
after:    xt = transpose(x, perm=(0, 2, 3, 1)); wt = transpose(w, perm=(2, 3, 1, 0))   (folds: w is constant)
          yt = conv2d(xt, wt, layout="NHWC"); y = transpose(yt, perm=(0, 3, 1, 2))
"""

from __future__ import annotations

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
LAYOUT_OPS = ("conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool")


def to_channels_last(graph: Graph, fired: list[str] | None = None) -> Graph:
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    for node in graph.nodes:
        inputs = [rename.get(i, i) for i in node.inputs]
        nchw_layout = node.op in LAYOUT_OPS and node.attr("layout", "NCHW") == "NCHW"
        nchw_norm = node.op == "batch_norm" and node.attr("axis", 1) == 1 and len(graph.values[node.inputs[0]].shape) == 4
        if not (nchw_layout or nchw_norm):
            b.copy(node, graph, rename)
            continue
        x = b.add("transpose", [inputs[0]], {"perm": TO_NHWC}, f"{node.name}_to_nhwc")
        rest = inputs[1:]
        attrs = node.attr_dict
        if node.op == "conv2d":
            rest[0] = b.add("transpose", [rest[0]], {"perm": (2, 3, 1, 0)}, f"{node.name}_w_hwio")
        if nchw_norm:
            attrs["axis"] = 3
        else:
            attrs["layout"] = "NHWC"
        y = b.add(node.op, [x, *rest], attrs, f"{node.name}_nhwc")
        rename[node.outputs[0]] = b.add("transpose", [y], {"perm": TO_NCHW}, f"{node.name}_to_nchw")
        if fired is not None:
            fired.append(f"to_channels_last: {node.name} ({node.op})")
    return b.build_renamed(graph.outputs, rename)
