"""Convolutions (layouts and argument order as TVM te_workload / topi).

Every padded convolution is two stages: a `pad` stage (zeros outside the input, see
_common.pad) and the reduction that reads it, e.g. for conv2d_nhwc:

    pad[n, y, x, c]   = select(p <= y < H + p && p <= x < W + p, X[n, y - p, x - p, c], 0)
    out[n, h, w, co]  = sum_{rh, rw, rc} pad[n, h*s + rh*d, w*s + rw*d, g(co)*CI/G + rc] * W[rh, rw, rc, co]

with g(co) = co // (CO/G) the group of output channel co. Output extent per spatial dimension:
(in + 2p - d*(k-1) - 1) // s + 1. Padding is symmetric (an int or one int per spatial dimension).
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph import te
from tilegraph.ops._common import (
    as_tuple,
    check_float,
    check_tensor,
    clamp,
    conv_out_size,
    leading_extent,
    operator,
    pad,
    same_dtype,
    stage,
    tap,
    widening,
)
from tilegraph.te.tensor import Tensor

IntOrTuple = int | Sequence[int]

_SPATIAL_NAMES = {1: ("l",), 2: ("h", "w"), 3: ("d", "h", "w")}


def _conv_arguments(x: Tensor, w: Tensor, stride: IntOrTuple, padding: IntOrTuple, dilation: IntOrTuple,
                    dims: int, integer: bool = False) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Check a convolution's tensors (float and one dtype, or `integer` ones that widening checks;
    ranks dims + 2) and return its (strides, pads, dilations), one per spatial dimension."""
    check_tensor(x, "x", dims + 2)
    check_tensor(w, "w", dims + 2)
    if not integer:
        check_float(x, "x")
        same_dtype({"x": x, "w": w})
    return (as_tuple(stride, dims, "stride", 1), as_tuple(padding, dims, "padding", 0),
            as_tuple(dilation, dims, "dilation", 1))


def _conv_channels_last(x: Tensor, w: Tensor, stride: IntOrTuple, padding: IntOrTuple, dilation: IntOrTuple,
                        groups: int, name: str, padding_after: IntOrTuple | None = None,
                        accumulate: str | None = None, pad_value: float = 0.0) -> Tensor:
    """x (N, *S, CI), w (*K, CI/groups, CO) -> (N, *O, CO), for 1 to 3 spatial dimensions; `padding`
    before each spatial dimension and `padding_after` after it (default: the same, symmetric), the
    border reading `pad_value`; `accumulate` ("float32") sums bfloat16 x and w in float32 (a
    float32 result), ("int32") uint8/int8 x and int8 w exactly in int32."""
    dims = x.ndim - 2
    strides, pads, dilations = _conv_arguments(x, w, stride, padding, dilation, dims, accumulate == "int32")
    widen = widening(accumulate, {"x": x, "w": w})
    after = pads if padding_after is None else as_tuple(padding_after, dims, "padding_after", 0)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"argument groups must be a positive int, got {groups!r}")
    ci, co = x.shape[-1], w.shape[-1]
    if ci % groups or co % groups:
        raise ValueError(f"argument groups={groups} must divide the input channels ({ci}) and output channels ({co})")
    ci_per_group = ci // groups
    if w.shape[-2] != ci_per_group:
        raise ValueError(f"argument w has {w.shape[-2]} input channels (shape {w.shape}); expected "
                         f"{ci_per_group} = x channels {ci} / groups {groups}")
    kernel = w.shape[:dims]
    out_spatial = tuple(
        conv_out_size(x.shape[1 + d], kernel[d], strides[d], pads[d], after[d], dilations[d], f"argument w ({name})")
        for d in range(dims))
    padded = pad(x, (0, *pads, 0), (0, *after, 0), pad_value, name=f"{name}_pad")
    spatial_names = _SPATIAL_NAMES[dims]
    reduce_spatial = tuple(te.reduce_axis(k, f"r{n}") for k, n in zip(kernel, spatial_names))
    rc = te.reduce_axis(ci_per_group, "rc")
    co_per_group = co // groups

    def body(n, *rest):  # noqa: ANN001, ANN002, ANN202
        *pos, c_out = rest
        taps = [tap(p, s, r, d) for p, s, r, d in zip(pos, strides, reduce_spatial, dilations)]
        channel = rc if groups == 1 else (c_out // co_per_group) * ci_per_group + rc
        return te.sum(widen(padded[(n, *taps, channel)]) * widen(w[(*reduce_spatial, rc, c_out)]),
                      axis=(*reduce_spatial, rc))

    return stage((leading_extent(x), *out_spatial, co), body, name=name, axis_names=("n", *spatial_names, "co"))


@operator("conv1d_nlc")
def conv1d_nlc(x: Tensor, w: Tensor, stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
               name: str = "conv1d_nlc") -> Tensor:
    """x (N, L, CI), w (KW, CI, CO) -> (N, OL, CO)."""
    check_tensor(x, "x", 3)
    return _conv_channels_last(x, w, stride, padding, dilation, 1, name)


@operator("conv2d_nhwc")
def conv2d_nhwc(x: Tensor, w: Tensor, stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                groups: int = 1, name: str = "conv2d_nhwc", padding_after: IntOrTuple | None = None,
                accumulate: str | None = None, pad_value: float = 0.0) -> Tensor:
    """x (N, H, W, CI), w (KH, KW, CI/groups, CO) -> (N, OH, OW, CO); `padding_after` (bottom, right)
    when it differs from `padding` (top, left), as TensorFlow's SAME padding of a stride-2 window;
    `accumulate` ("float32") sums bfloat16 x and w in float32, ("int32") uint8/int8 x and int8 w
    exactly in int32 (an int32 result); the border reads `pad_value` (a quantized x's zero point)."""
    check_tensor(x, "x", 4)
    return _conv_channels_last(x, w, stride, padding, dilation, groups, name, padding_after, accumulate, pad_value)


@operator("conv3d_ndhwc")
def conv3d_ndhwc(x: Tensor, w: Tensor, stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                 name: str = "conv3d_ndhwc") -> Tensor:
    """x (N, D, H, W, CI), w (KD, KH, KW, CI, CO) -> (N, OD, OH, OW, CO)."""
    check_tensor(x, "x", 5)
    return _conv_channels_last(x, w, stride, padding, dilation, 1, name)


@operator("conv2d_nchw")
def conv2d_nchw(x: Tensor, w: Tensor, stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                name: str = "conv2d_nchw") -> Tensor:
    """x (N, CI, H, W), w (CO, CI, KH, KW) -> (N, CO, OH, OW)."""
    (sh, sw), (ph, pw), (dh, dw) = _conv_arguments(x, w, stride, padding, dilation, 2)
    (_, ci, h, wd), n = x.shape, leading_extent(x)
    co, wci, kh, kw = w.shape
    if wci != ci:
        raise ValueError(f"argument w has {wci} input channels (shape {w.shape}), x has {ci} (shape {x.shape})")
    oh = conv_out_size(h, kh, sh, ph, ph, dh, "argument w (conv2d_nchw)")
    ow = conv_out_size(wd, kw, sw, pw, pw, dw, "argument w (conv2d_nchw)")
    padded = pad(x, (0, 0, ph, pw), (0, 0, ph, pw), 0.0, name=f"{name}_pad")
    rc, rh, rw = te.reduce_axis(ci, "rc"), te.reduce_axis(kh, "rh"), te.reduce_axis(kw, "rw")
    return stage(
        (n, co, oh, ow),
        lambda nn, f, y, xx: te.sum(padded[nn, rc, tap(y, sh, rh, dh), tap(xx, sw, rw, dw)] * w[f, rc, rh, rw],
                                    axis=(rc, rh, rw)),
        name=name, axis_names=("n", "co", "h", "w"))


@operator("depthwise_conv2d_nhwc")
def depthwise_conv2d_nhwc(x: Tensor, w: Tensor, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                          dilation: IntOrTuple = 1, name: str = "depthwise_conv2d_nhwc") -> Tensor:
    """x (N, H, W, C), w (KH, KW, C, M) -> (N, OH, OW, C*M); output channel c reads input channel c // M."""
    (sh, sw), (ph, pw), (dh, dw) = _conv_arguments(x, w, stride, padding, dilation, 2)
    (_, h, wd, c), n = x.shape, leading_extent(x)
    kh, kw, wc, mult = w.shape
    if wc != c:
        raise ValueError(f"argument w has {wc} channels (shape {w.shape}), x has {c} (shape {x.shape})")
    oh = conv_out_size(h, kh, sh, ph, ph, dh, "argument w (depthwise_conv2d_nhwc)")
    ow = conv_out_size(wd, kw, sw, pw, pw, dw, "argument w (depthwise_conv2d_nhwc)")
    padded = pad(x, (0, ph, pw, 0), (0, ph, pw, 0), 0.0, name=f"{name}_pad")
    rh, rw = te.reduce_axis(kh, "rh"), te.reduce_axis(kw, "rw")

    def body(nn, y, xx, ch):  # noqa: ANN001, ANN202
        c_in = ch if mult == 1 else ch // mult
        m = 0 if mult == 1 else ch % mult
        return te.sum(padded[nn, tap(y, sh, rh, dh), tap(xx, sw, rw, dw), c_in] * w[rh, rw, c_in, m], axis=(rh, rw))

    return stage((n, oh, ow, c * mult), body, name=name, axis_names=("n", "h", "w", "c"))


@operator("conv2d_transpose_nhwc")
def conv2d_transpose_nhwc(x: Tensor, w: Tensor, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                          name: str = "conv2d_transpose_nhwc") -> Tensor:
    """The gradient of conv2d_nhwc w.r.t. its input: x (N, H, W, CI), w (KH, KW, CI, CO) -> (N, OH, OW, CO).

    out[n, y*s + kh - p, x*s + kw - p, co] += X[n, y, x, ci] * W[kh, kw, ci, co], OH = (H-1)*s - 2p + KH.
    Built as a gather: a stage `dilated` spreads X with s-1 zeros between rows/columns and k-1-p zeros of
    border, then out[n, h, w, co] = sum dilated[n, h + rh, w + rw, rc] * W[KH-1-rh, KW-1-rw, rc, co].
    """
    check_tensor(x, "x", 4)
    check_tensor(w, "w", 4)
    check_float(x, "x")
    same_dtype({"x": x, "w": w})
    strides = as_tuple(stride, 2, "stride", 1)
    pads = as_tuple(padding, 2, "padding", 0)
    n, h, wd, ci = x.shape
    kh, kw, wci, co = w.shape
    if wci != ci:
        raise ValueError(f"argument w has {wci} input channels (shape {w.shape}), x has {ci} (shape {x.shape})")
    kernel = (kh, kw)
    for p, k in zip(pads, kernel):
        if p > k - 1:
            raise ValueError(f"argument padding={padding!r} must be at most kernel size - 1 ({k - 1})")
    out_hw = tuple((size - 1) * s - 2 * p + k for size, s, p, k in zip((h, wd), strides, pads, kernel))
    if min(out_hw) < 1:
        raise ValueError(f"argument padding={padding!r} leaves an empty output {out_hw}")
    border = tuple(k - 1 - p for k, p in zip(kernel, pads))
    dilated_hw = tuple(o + k - 1 for o, k in zip(out_hw, kernel))

    def spread(nn, y, xx, c):  # noqa: ANN001, ANN202
        conds, reads = [], []
        for i, b, s, size in zip((y, xx), border, strides, (h, wd)):
            shifted = i - b
            conds += [shifted.ge(0), shifted.lt((size - 1) * s + 1)]
            if s > 1:
                conds.append((shifted % s).eq(0))
            reads.append(clamp(shifted // s if s > 1 else shifted, size))
        return te.select(te.all_of(*conds), x[nn, reads[0], reads[1], c], te.const(0.0, x.dtype))

    dilated = stage((n, *dilated_hw, ci), spread, name=f"{name}_dilated", tag="pad")
    rh, rw, rc = te.reduce_axis(kh, "rh"), te.reduce_axis(kw, "rw"), te.reduce_axis(ci, "rc")
    return stage(
        (n, *out_hw, co),
        lambda nn, y, xx, f: te.sum(dilated[nn, y + rh, xx + rw, rc] * w[kh - 1 - rh, kw - 1 - rw, rc, f],
                                    axis=(rh, rw, rc)),
        name=name, axis_names=("n", "h", "w", "co"))


@operator("conv2d_capsule_nhwijc")
def conv2d_capsule_nhwijc(x: Tensor, w: Tensor, stride: int = 1, padding: int = 0, capsule_size: int = 4,
                          name: str = "conv2d_capsule_nhwijc") -> Tensor:
    """Capsule convolution: x (N, H, W, cap, cap, CI), w (K, K, cap, cap, CI, CO) -> (N, OH, OW, cap, cap, CO).

    out[n, h, w, i, j, co] = sum_{rh, rw, ck, rc} pad[n, h*s + rh, w*s + rw, i, ck, rc] * W[rh, rw, ck, j, rc, co]
    """
    check_tensor(x, "x", 6)
    check_tensor(w, "w", 6)
    check_float(x, "x")
    same_dtype({"x": x, "w": w})
    (s,) = as_tuple(stride, 1, "stride", 1)
    (p,) = as_tuple(padding, 1, "padding", 0)
    (cap,) = as_tuple(capsule_size, 1, "capsule_size", 1)
    n, h, wd, cap_i, cap_j, ci = x.shape
    kh, kw, wcap_i, wcap_j, wci, co = w.shape
    if (cap_i, cap_j, wcap_i, wcap_j) != (cap,) * 4:
        raise ValueError(f"arguments x {x.shape} and w {w.shape} must have capsule extents {cap}x{cap} "
                         f"(capsule_size={cap})")
    if wci != ci:
        raise ValueError(f"argument w has {wci} input channels (shape {w.shape}), x has {ci} (shape {x.shape})")
    if kh != kw:
        raise ValueError(f"argument w must have a square kernel, got {kh}x{kw}")
    oh = conv_out_size(h, kh, s, p, p, 1, "argument w (conv2d_capsule_nhwijc)")
    ow = conv_out_size(wd, kw, s, p, p, 1, "argument w (conv2d_capsule_nhwijc)")
    padded = pad(x, (0, p, p, 0, 0, 0), (0, p, p, 0, 0, 0), 0.0, name=f"{name}_pad")
    rh, rw = te.reduce_axis(kh, "rh"), te.reduce_axis(kw, "rw")
    ck, rc = te.reduce_axis(cap, "cap_k"), te.reduce_axis(ci, "rc")
    return stage(
        (n, oh, ow, cap, cap, co),
        lambda nn, y, xx, cap_i, cap_j, f: te.sum(
            padded[nn, tap(y, s, rh), tap(xx, s, rw), cap_i, ck, rc] * w[rh, rw, ck, cap_j, rc, f], axis=(rh, rw, ck, rc)),
        name=name, axis_names=("n", "h", "w", "cap_i", "cap_j", "co"))
