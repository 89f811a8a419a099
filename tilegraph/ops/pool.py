"""2-D pooling in NHWC or NCHW layout (layout="NHWC" | "NCHW").

    max_pool2d:  pad with -inf, out[.., h, w, ..] = max_{rh, rw} pad[.., h*s + rh, w*s + rw, ..]
    avg_pool2d:  pad with 0,    sum = sum_{rh, rw} pad[...],   out = sum / count(h, w)
                 count(h, w) is the number of window points inside the unpadded input, i.e. padding is
                 excluded from the average (torch's count_include_pad=False):
                 count = (min(h*s - p + k, H) - max(h*s - p, 0)) * (same for w)
    global_avg_pool2d: out[n, 1, 1, c] (NHWC) / out[n, c, 1, 1] (NCHW) = mean over H and W
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph import te
from tilegraph.ops._common import as_tuple, check_float, check_tensor, conv_out_size, operator, pad, stage, tap
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor

IntOrTuple = int | Sequence[int]
_LAYOUTS = ("NHWC", "NCHW")


def _spatial_dims(layout: str) -> tuple[int, int]:
    if layout not in _LAYOUTS:
        raise ValueError(f"argument layout must be one of {_LAYOUTS}, got {layout!r}")
    return (1, 2) if layout == "NHWC" else (2, 3)


def _with_spatial(idx: Sequence[Expr], dims: tuple[int, int], values: Sequence[Expr]) -> tuple[Expr, ...]:
    out = list(idx)
    for d, v in zip(dims, values):
        out[d] = v
    return tuple(out)


def _pool_setup(x: Tensor, kernel: IntOrTuple, stride: IntOrTuple, padding: IntOrTuple, layout: str):  # noqa: ANN202
    check_tensor(x, "x", 4)
    check_float(x, "x")
    dims = _spatial_dims(layout)
    ks = as_tuple(kernel, 2, "kernel", 1)
    ss = as_tuple(stride, 2, "stride", 1)
    ps = as_tuple(padding, 2, "padding", 0)
    for p, k in zip(ps, ks):
        if p >= k:
            raise ValueError(f"argument padding={padding!r} must be smaller than the kernel {ks}, "
                             "or some windows would hold only padding")
    out_hw = tuple(conv_out_size(x.shape[d], k, s, p, p, 1, "argument kernel") for d, k, s, p in zip(dims, ks, ss, ps))
    out_shape = list(x.extents)
    for d, o in zip(dims, out_hw):
        out_shape[d] = o
    return dims, ks, ss, ps, tuple(out_shape)


def _axis_names(layout: str) -> tuple[str, ...]:
    return ("n", "h", "w", "c") if layout == "NHWC" else ("n", "c", "h", "w")


@operator("max_pool2d")
def max_pool2d(x: Tensor, kernel: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
               layout: str = "NHWC", name: str = "max_pool2d") -> Tensor:
    """Window maximum; padded points never win (they are -inf)."""
    dims, ks, ss, ps, out_shape = _pool_setup(x, kernel, stride, padding, layout)
    pad_width = _with_spatial((0, 0, 0, 0), dims, ps)
    padded = pad(x, pad_width, pad_width, float("-inf"), name=f"{name}_pad")
    rh, rw = te.reduce_axis(ks[0], "rh"), te.reduce_axis(ks[1], "rw")

    def body(*idx: Expr) -> Expr:
        taps = (tap(idx[dims[0]], ss[0], rh), tap(idx[dims[1]], ss[1], rw))
        return te.max(padded[_with_spatial(idx, dims, taps)], axis=(rh, rw))

    return stage(out_shape, body, name=name, axis_names=_axis_names(layout))


@operator("avg_pool2d")
def avg_pool2d(x: Tensor, kernel: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
               layout: str = "NHWC", name: str = "avg_pool2d") -> Tensor:
    """Window mean over the points inside the input (padding excluded from the count)."""
    dims, ks, ss, ps, out_shape = _pool_setup(x, kernel, stride, padding, layout)
    pad_width = _with_spatial((0, 0, 0, 0), dims, ps)
    padded = pad(x, pad_width, pad_width, 0.0, name=f"{name}_pad")
    rh, rw = te.reduce_axis(ks[0], "rh"), te.reduce_axis(ks[1], "rw")
    names = _axis_names(layout)

    def window_sum(*idx: Expr) -> Expr:
        taps = (tap(idx[dims[0]], ss[0], rh), tap(idx[dims[1]], ss[1], rw))
        return te.sum(padded[_with_spatial(idx, dims, taps)], axis=(rh, rw))

    total = stage(out_shape, window_sum, name=f"{name}_sum", axis_names=names)

    def count(i: Expr, d: int) -> Expr | int:
        if not ps[d]:
            return ks[d]  # without padding every window lies inside the input
        start = (i * ss[d] if ss[d] != 1 else i) - ps[d]
        return te.min_(start + ks[d], x.shape[dims[d]]) - te.max_(start, 0)

    def mean(*idx: Expr) -> Expr:
        points = te.cast(x.dtype, count(idx[dims[0]], 0)) * te.cast(x.dtype, count(idx[dims[1]], 1))
        return total[idx] / points

    return stage(out_shape, mean, name=name, axis_names=names)


@operator("global_avg_pool2d")
def global_avg_pool2d(x: Tensor, layout: str = "NHWC", name: str = "global_avg_pool2d") -> Tensor:
    """Mean over H and W, keeping them as extent-1 dimensions."""
    check_tensor(x, "x", 4)
    check_float(x, "x")
    dims = _spatial_dims(layout)
    h, w = (x.shape[d] for d in dims)
    out_shape = list(x.extents)
    for d in dims:
        out_shape[d] = 1
    rh, rw = te.reduce_axis(h, "rh"), te.reduce_axis(w, "rw")
    names = _axis_names(layout)

    def window_sum(*idx: Expr) -> Expr:
        return te.sum(x[_with_spatial(idx, dims, (rh, rw))], axis=(rh, rw))

    total = stage(out_shape, window_sum, name=f"{name}_sum", axis_names=names)
    return stage(out_shape, lambda *idx: total[idx] / float(h * w), name=name, axis_names=names)
