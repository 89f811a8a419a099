"""Subgraphs of the Ansor suite (TVM te_workload names in brackets).

conv2d_bn_relu [conv2d_nhwc_bn_relu], the conv2d_nhwc stages followed by one epilogue stage:
    out[n, h, w, c] = max((conv[n, h, w, c] + bias[c]) * bn_scale[c] + bn_offset[c], 0)

transpose_batch_matmul [transpose_batch_matmul], query/value (B, L, H, D):
    query_t[b, h, l, d] = query[b, l, h, d];   value_t[b, h, d, l] = value[b, l, h, d]
    out[b, h, i, j] = sum_d query_t[b, h, i, d] * value_t[b, h, d, j]        -> (B, H, L, L)
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph import te
from tilegraph.ops._common import check_tensor, operator, same_dtype, stage
from tilegraph.ops.conv import conv2d_nhwc
from tilegraph.te.tensor import Tensor


@operator("conv2d_bn_relu")
def conv2d_bn_relu(x: Tensor, w: Tensor, bias: Tensor, bn_scale: Tensor, bn_offset: Tensor,
                   stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                   dilation: int | Sequence[int] = 1, name: str = "conv2d_bn_relu") -> Tensor:
    """relu((conv2d_nhwc(x, w) + bias) * bn_scale + bn_offset), per output channel."""
    check_tensor(x, "x", 4)
    check_tensor(w, "w", 4)
    co = w.shape[-1]
    for arg, t in (("bias", bias), ("bn_scale", bn_scale), ("bn_offset", bn_offset)):
        check_tensor(t, arg)
        if t.shape != (co,):
            raise ValueError(f"argument {arg} must have shape ({co},) (the output channels of w), got {t.shape}")
    same_dtype({"x": x, "w": w, "bias": bias, "bn_scale": bn_scale, "bn_offset": bn_offset})
    conv = conv2d_nhwc(x, w, stride, padding, dilation, name=f"{name}_conv")
    zero = te.const(0.0, x.dtype)
    return stage(
        conv.shape,
        lambda n, h, ww, c: te.max_((conv[n, h, ww, c] + bias[c]) * bn_scale[c] + bn_offset[c], zero),
        name=name)


@operator("transpose_batch_matmul")
def transpose_batch_matmul(query: Tensor, value: Tensor, name: str = "transpose_batch_matmul") -> Tensor:
    """Attention scores q @ v^T per batch and head: query, value (B, L, H, D) -> (B, H, L, L)."""
    check_tensor(query, "query", 4)
    check_tensor(value, "value", 4)
    if query.shape != value.shape:
        raise ValueError(f"arguments query {query.shape} and value {value.shape} must have the same shape")
    same_dtype({"query": query, "value": value})
    batch, seq, heads, dim = query.shape
    query_t = stage((batch, heads, seq, dim), lambda b, h, s, d: query[b, s, h, d], name=f"{name}_query_t",
                    tag="transpose")
    value_t = stage((batch, heads, dim, seq), lambda b, h, d, s: value[b, s, h, d], name=f"{name}_value_t",
                    tag="transpose")
    k = te.reduce_axis(dim, "k")
    return stage((batch, heads, seq, seq),
                 lambda b, h, i, j: te.sum(query_t[b, h, i, k] * value_t[b, h, k, j], axis=k), name=name)
