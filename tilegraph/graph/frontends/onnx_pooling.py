"""Pooling of any rank, dilation, padding and dtype as one 1-D window per spatial axis (what the
2-D pooling kernels do not cover: 3-D pools, dilations, average pools whose padding is
asymmetric and not counted, integer inputs).

    max over a box  = max over axis 1 of (max over axis 2 of ...)        (a box is a product of ranges)
    mean over a box = (sum over axis 1 of (sum over axis 2 ...)) / prod of per-axis counts

Per axis: pad explicitly (-inf, the dtype's lowest, or 0), then combine the k strided slices
x[j * dilation :: stride] (j < k) with max or add; an average divides by a constant of counts
(the window's positions inside the input, or inside the padded input when padding counts).

MaxPool's Indices output: a running maximum over the window's taps (the first maximum wins)
carrying each tap's flat input index from a constant table.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.ir import is_float


def pool_pads(node: Any, attrs: dict[str, Any], sizes: Sequence[int], kernel: Sequence[int],
              strides: Sequence[int], dilations: Sequence[int]) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial axis from `pads` or `auto_pad`."""
    rank = len(sizes)
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in attrs.get("pads", [0] * (2 * rank))]
        if len(pads) != 2 * rank:
            raise GraphError(f"node {node.name!r} ({node.op_type}): pads {pads} do not fit {rank} spatial axes")
        return pads[:rank], pads[rank:]
    if auto == "VALID":
        return [0] * rank, [0] * rank
    total = [max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0) for n, k, s, d in zip(sizes, kernel, strides, dilations)]
    small, big = [t // 2 for t in total], [t - t // 2 for t in total]
    return (small, big) if auto == "SAME_UPPER" else (big, small)


def output_extent(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int, ceil: bool) -> int:
    span = (kernel - 1) * dilation + 1
    if ceil:
        count = -(-(size + begin + end - span) // stride) + 1
        if (count - 1) * stride >= size + begin:  # ONNX drops a last window that starts in the end padding
            count -= 1
        return count
    return (size + begin + end - span) // stride + 1


def _lowest(dtype: str) -> float:
    return float("-inf") if is_float(dtype) else float(
        0 if dtype == "bool" else np.iinfo(np.dtype(dtype)).min)


def pool_by_axes(e: Emitter, node: Any, x: str, attrs: dict[str, Any], out: str) -> str:
    is_max = node.op_type == "MaxPool"
    name = node.name or node.op_type
    t = e.type_of(x)
    shape, rank = t.shape, len(t.shape)
    spatial = rank - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(s) for s in attrs.get("strides", [1] * spatial)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * spatial)]
    if not (len(kernel) == len(strides) == len(dilations) == spatial) or min(kernel + strides + dilations) < 1:
        raise GraphError(f"node {name!r} ({node.op_type}): kernel {kernel}, strides {strides} and dilations "
                         f"{dilations} do not fit {t}")
    begin, end = pool_pads(node, attrs, shape[2:], kernel, strides, dilations)
    ceil = bool(attrs.get("ceil_mode", 0))
    include_pad = bool(attrs.get("count_include_pad", 0))
    y = x
    counts = []
    for i in range(spatial):
        axis, n, k, s, d = 2 + i, shape[2 + i], kernel[i], strides[i], dilations[i]
        extent = output_extent(n, k, s, d, begin[i], end[i], ceil)
        if extent < 1:
            raise GraphError(f"node {name!r} ({node.op_type}): the window does not fit spatial axis {i} of {t}")
        needed = (extent - 1) * s + (k - 1) * d + 1 - (n + begin[i])  # past the input's end
        after = max(needed, 0)
        if begin[i] or after:
            widths_before, widths_after = [0] * rank, [0] * rank
            widths_before[axis], widths_after[axis] = begin[i], after
            y = e.emit("pad", [y], {"before": tuple(widths_before), "after": tuple(widths_after),
                                    "value": _lowest(t.dtype) if is_max else 0.0}, f"{name}_pad{i}")
        current = e.type_of(y).shape
        total = None
        for j in range(k):
            start = list((0,) * rank)
            stop, step = list(current), [1] * rank
            start[axis], stop[axis], step[axis] = j * d, j * d + (extent - 1) * s + 1, s
            window = e.emit("slice", [y], {"begin": tuple(start), "end": tuple(stop), "steps": tuple(step)},
                            f"{name}_axis{i}_tap{j}")
            total = window if total is None else e.emit("max" if is_max else "add", [total, window],
                                                        name=f"{name}_axis{i}_acc{j}")
        y = total
        positions = np.arange(extent)[:, None] * s + np.arange(k)[None, :] * d - begin[i]  # input index per tap
        low, high = (-begin[i], n + end[i]) if include_pad else (0, n)
        counts.append(((positions >= low) & (positions < high)).sum(axis=1))
    if not is_max:
        divisor = counts[0]
        for c in counts[1:]:
            divisor = np.multiply.outer(divisor, c)
        divisor = e.constant(np.asarray(divisor, dtype=t.dtype).reshape((1, 1, *divisor.shape)), f"{name}_counts")
        y = e.emit("div", [y, divisor], name=f"{name}_mean")
    return e.emit("identity", [y], name=name, outputs=[out])


def max_pool_with_indices(e: Emitter, node: Any, x: str, attrs: dict[str, Any]) -> tuple[str, str]:
    """(MaxPool's values, its Indices): a running maximum over the window's taps, the first tap
    holding the maximum winning, with each tap's flat input index (row-major, or column-major
    within a channel when storage_order is 1) as a constant table."""
    name = node.name or "max_pool"
    t = e.type_of(x)
    shape, rank = t.shape, len(t.shape)
    spatial = shape[2:]
    dims = rank - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(s) for s in attrs.get("strides", [1] * dims)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * dims)]
    begin, end = pool_pads(node, attrs, spatial, kernel, strides, dilations)
    ceil = bool(attrs.get("ceil_mode", 0))
    extents = [output_extent(n, k, s, d, b, f, ceil) for n, k, s, d, b, f in
               zip(spatial, kernel, strides, dilations, begin, end)]
    if min(extents) < 1:
        raise GraphError(f"node {name!r} (MaxPool): the window does not fit {t}")
    after = [max((o - 1) * s + (k - 1) * d + 1 - (n + b), 0)
             for o, s, k, d, n, b in zip(extents, strides, kernel, dilations, spatial, begin)]
    padded = x
    if any(begin) or any(after):
        padded = e.emit("pad", [x], {"before": (0, 0, *begin), "after": (0, 0, *after), "value": _lowest(t.dtype)},
                        f"{name}_pad")
    order = list(range(dims)) if not attrs.get("storage_order", 0) else list(range(dims))[::-1]
    weights = {axis: int(np.prod([spatial[a] for a in order[order.index(axis) + 1:]])) for axis in range(dims)}
    per_channel = int(np.prod(spatial))
    base = (np.arange(shape[0] * shape[1], dtype=np.int64) * per_channel).reshape(shape[0], shape[1], *([1] * dims))
    best = index = None
    for number, taps in enumerate(itertools.product(*[range(k) for k in kernel])):
        start = [0, 0] + [j * d for j, d in zip(taps, dilations)]
        stop = [shape[0], shape[1]] + [j * d + (o - 1) * s + 1 for j, d, o, s in zip(taps, dilations, extents, strides)]
        value = e.emit("slice", [padded], {"begin": tuple(start), "end": tuple(stop), "steps": (1, 1, *strides)},
                       f"{name}_tap{number}")
        grids = np.meshgrid(*[np.arange(o) * s + j * d - b for o, s, j, d, b in
                              zip(extents, strides, taps, dilations, begin)], indexing="ij")
        flat = sum(g * weights[axis] for axis, g in enumerate(grids))
        where_from = e.constant((base + flat[None, None]).astype(np.int64), f"{name}_index{number}")
        if best is None:
            best, index = value, where_from
            continue
        better = e.emit("greater", [value, best], name=f"{name}_better{number}")
        best = e.emit("where", [better, value, best], name=f"{name}_best{number}")
        index = e.emit("where", [better, where_from, index], name=f"{name}_argmax{number}")
    return best, index
