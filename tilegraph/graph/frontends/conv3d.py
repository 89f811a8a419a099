"""A 3-D convolution written with the 2-D convolution graph op: one conv2d per depth tap.

    conv3d(x, w)[n, o, d] = sum over kd of conv2d(x[n, :, d * stride + kd * dilation], w[:, :, kd])

Each depth tap's input planes (every output depth at once) are a strided slice of x, batched
with N as [N * D_out, C, H, W]; the taps' results are added. Used by Conv and ConvTranspose on
[N, C, D, H, W] (video, volumetric models), so the 2-D kernels' schedules and tuning serve them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter


def conv3d(e: Emitter, x: str, w: str, bias: str, strides: Sequence[int], dilations: Sequence[int],
           begin: Sequence[int], end: Sequence[int], groups: int, name: str, out: str = "") -> str:
    n, channels, depth, height, width = e.type_of(x).shape
    out_channels, per_group, kd, kh, kw = e.type_of(w).shape
    if per_group * groups != channels:
        raise GraphError(f"node {name!r} (Conv): weights {e.type_of(w)} do not fit {e.type_of(x)} in {groups} groups")
    if any(begin) or any(end):
        x = e.emit("pad", [x], {"before": (0, 0, *begin), "after": (0, 0, *end), "value": 0.0}, f"{name}_pad")
        n, channels, depth, height, width = e.type_of(x).shape
    sd, sh, sw = strides
    dd, dh, dw = dilations
    out_depth = (depth - dd * (kd - 1) - 1) // sd + 1
    if out_depth < 1:
        raise GraphError(f"node {name!r} (Conv): the kernel does not fit the depth of {e.type_of(x)}")
    total = None
    for tap in range(kd):
        start = tap * dd
        slab = e.emit("slice", [x], {"begin": (0, 0, start, 0, 0),
                                     "end": (n, channels, start + (out_depth - 1) * sd + 1, height, width),
                                     "steps": (1, 1, sd, 1, 1)}, f"{name}_depth{tap}")
        planes = e.emit("transpose", [slab], {"perm": (0, 2, 1, 3, 4)}, f"{name}_planes{tap}")
        planes = e.emit("reshape", [planes], {"shape": (n * out_depth, channels, height, width)}, f"{name}_batch{tap}")
        kernel = e.emit("slice", [w], {"begin": (0, 0, tap, 0, 0), "end": (out_channels, per_group, tap + 1, kh, kw),
                                       "steps": (1,) * 5}, f"{name}_w{tap}")
        kernel = e.emit("reshape", [kernel], {"shape": (out_channels, per_group, kh, kw)}, f"{name}_w{tap}_2d")
        y = e.emit("conv2d", [planes, kernel], {"layout": "NCHW", "strides": (sh, sw), "pads": (0, 0, 0, 0),
                                                "dilations": (dh, dw), "groups": groups}, f"{name}_tap{tap}")
        total = y if total is None else e.emit("add", [total, y], name=f"{name}_sum{tap}")
    _, _, out_h, out_w = e.type_of(total).shape
    y = e.emit("reshape", [total], {"shape": (n, out_depth, out_channels, out_h, out_w)}, f"{name}_split")
    y = e.emit("transpose", [y], {"perm": (0, 2, 1, 3, 4)}, f"{name}_ncdhw")
    if bias:
        y = e.emit("add", [y, e.emit("reshape", [bias], {"shape": (1, out_channels, 1, 1, 1)}, f"{name}_b")],
                   name=f"{name}_biased")
    return e.emit("identity", [y], name=f"{name}_out", outputs=[out] if out else None)
