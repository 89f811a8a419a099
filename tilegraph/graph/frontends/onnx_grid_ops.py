"""ONNX sampling-grid operators (registered into onnx_ops.CONVERTERS).

    AffineGrid(theta [N, 2, 3], size [N, C, H, W])   matmul(base grid [H*W, 3] of (x, y, 1), theta^T)
                                                     -> [N, H, W, 2]; 3-D alike with (x, y, z, 1)

The base grid is a constant once `size` is known: normalised coordinates in [-1, 1], pixel
corners (align_corners=1) or pixel centres (0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _ints, _out, converts


def normalised_coordinates(n: int, align_corners: bool) -> np.ndarray:
    """The n sample positions of one axis in [-1, 1] (corners, or centres of n cells)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (2 * np.arange(n) + 1) / n - 1


@converts("AffineGrid")
def _affine_grid(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    theta, name = ins[0], node.name
    size = _ints(e, ins[1], f"node {name!r} (AffineGrid) size")
    spatial = size[2:]
    t = e.type_of(theta)
    if len(spatial) not in (2, 3) or t.shape != (size[0], len(spatial), len(spatial) + 1):
        raise GraphError(f"node {name!r} (AffineGrid): theta {t} does not fit size {size} ([N, C, H, W] with "
                         "theta [N, 2, 3], or [N, C, D, H, W] with theta [N, 3, 4])")
    if min(spatial) < 1:
        raise GraphError(f"node {name!r} (AffineGrid): size {size} has an empty spatial extent")
    axes = [normalised_coordinates(n, bool(attrs.get("align_corners", 0))) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # (z,) y, x varying along (D,) H, W
    columns = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)))]
    base = np.stack(columns, axis=1)[None].astype(t.dtype)  # [1, points, dims + 1]
    theta_t = e.emit("transpose", [theta], {"perm": (0, 2, 1)}, f"{name}_theta_t")
    grid = e.emit("matmul", [e.constant(base, f"{name}_base"), theta_t], name=f"{name}_points")
    return [e.emit("reshape", [grid], {"shape": (size[0], *spatial, len(spatial))}, name, [_out(node)])]
