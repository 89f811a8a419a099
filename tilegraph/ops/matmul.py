"""Matrix products.

    matmul(a, b)              out[i, j] = sum_k a[i, k] * b[k, j]          a (M, K), b (K, N)
      transpose_a / _b        a given as (K, M) / b given as (N, K)
      bias (N,)               a second stage: out[i, j] = prod[i, j] + bias[j]
      accumulate="float32"    bfloat16 a, b: sum_k float32(a[i, k]) * float32(b[k, j]), a float32 result
      accumulate="int32"      uint8/int8 a, int8 b: sum_k int32(a[i, k]) * int32(b[k, j]), exact, an int32 result
    dense(x, w, bias)         matmul(x, w, bias, transpose_b=True)        w (N, K), as topi.nn.dense
    batch_matmul(a, b)        out[b, i, j] = sum_k a[b, i, k] * b[b, k, j]  a (B, N, K), b (B, K, M)
"""

from __future__ import annotations

from tilegraph import te
from tilegraph.dtype import as_dtype
from tilegraph.ops._common import check_tensor, operator, same_dtype, same_extent, stage, widening
from tilegraph.ops.elementwise import broadcast_extents
from tilegraph.te.tensor import Tensor


@operator("matmul")
def matmul(a: Tensor, b: Tensor, bias: Tensor | None = None, transpose_a: bool = False,
           transpose_b: bool = False, name: str = "matmul", accumulate: str | None = None) -> Tensor:
    """a @ b (+ bias) for 2-D a and b; the transposes say how a and b are stored; `accumulate`
    ("float32") sums bfloat16 (or float32) operands in float32, ("int32") uint8/int8 operands
    exactly in int32 (bias, if any, has the accumulator's dtype then)."""
    check_tensor(a, "a", 2)
    check_tensor(b, "b", 2)
    m, k = (a.extents[1], a.extents[0]) if transpose_a else a.extents
    kb, n = (b.extents[1], b.extents[0]) if transpose_b else b.extents
    if not same_extent(k, kb):
        raise ValueError(f"arguments a {a.shape} and b {b.shape} disagree on the reduction extent ({k} vs {kb}) "
                         f"with transpose_a={transpose_a}, transpose_b={transpose_b}")
    widen = widening(accumulate, {"a": a, "b": b})
    if bias is not None:
        check_tensor(bias, "bias", 1)
        if bias.ndim != 1 or not same_extent(bias.extents[0], n):
            raise ValueError(f"argument bias must have shape ({n},), got {bias.shape}")
        result = a.dtype if accumulate is None else as_dtype(accumulate)
        if bias.dtype != result:
            raise TypeError(f"argument bias must have the result's dtype {result}, got {bias.dtype}")
    r = te.reduce_axis(k, "k")

    def product(i, j):  # noqa: ANN001, ANN202
        lhs = a[r, i] if transpose_a else a[i, r]
        rhs = b[j, r] if transpose_b else b[r, j]
        return te.sum(widen(lhs) * widen(rhs), axis=r)

    if bias is None:
        return stage((m, n), product, name=name)
    prod = stage((m, n), product, name=f"{name}_product")
    return stage((m, n), lambda i, j: prod[i, j] + bias[j], name=name, tag="bias_add")


@operator("dense")
def dense(x: Tensor, w: Tensor, bias: Tensor | None = None, name: str = "dense") -> Tensor:
    """x @ w.T (+ bias): x (M, K), w (N, K), bias (N,)."""
    check_tensor(x, "x", 2)
    check_tensor(w, "w", 2)
    if not same_extent(x.extents[1], w.extents[1]):
        raise ValueError(f"arguments x {x.shape} and w {w.shape} must agree on the last extent (K)")
    return matmul(x, w, bias, transpose_b=True, name=name)


@operator("batch_matmul")
def batch_matmul(a: Tensor, b: Tensor, name: str = "batch_matmul") -> Tensor:
    """Per-batch a @ b: a (B, N, K), b (B, K, M) -> (B, N, M)."""
    check_tensor(a, "a", 3)
    check_tensor(b, "b", 3)
    if not same_extent(a.extents[0], b.extents[0]):
        raise ValueError(f"arguments a {a.shape} and b {b.shape} have different batch extents")
    if not same_extent(a.extents[2], b.extents[1]):
        raise ValueError(f"arguments a {a.shape} and b {b.shape} disagree on K (a[2]={a.shape[2]}, b[1]={b.shape[1]})")
    same_dtype({"a": a, "b": b})
    batch, n, k = a.extents
    m = b.extents[2]
    r = te.reduce_axis(k, "k")
    return stage((batch, n, m), lambda bb, i, j: te.sum(a[bb, i, r] * b[bb, r, j], axis=r), name=name)


@operator("matmul_nd")
def matmul_nd(a: Tensor, b: Tensor, name: str = "matmul_nd", accumulate: str | None = None) -> Tensor:
    """numpy's a @ b for a and b of rank >= 2: batch dimensions broadcast,
    out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]  (a 2-D b is one weight shared by every batch);
    `accumulate` as for matmul."""
    check_tensor(a, "a")
    check_tensor(b, "b")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"arguments a {a.shape} and b {b.shape} must have rank >= 2 (reshape vectors first)")
    if not same_extent(a.extents[-1], b.extents[-2]):
        raise ValueError(f"arguments a {a.shape} and b {b.shape} disagree on K ({a.extents[-1]} vs {b.extents[-2]})")
    widen = widening(accumulate, {"a": a, "b": b})
    batch = broadcast_extents(a.extents[:-2], b.extents[:-2]) if a.ndim > 2 and b.ndim > 2 else (
        a.extents[:-2] if a.ndim > 2 else b.extents[:-2])
    r = te.reduce_axis(a.extents[-1], "k")

    def batch_index(t: Tensor, idx: tuple) -> tuple:  # noqa: ANN001
        lead = len(batch) - (t.ndim - 2)
        return tuple(0 if extent == 1 else idx[lead + d] for d, extent in enumerate(t.shape[:-2]))

    def product(*idx):  # noqa: ANN002, ANN202
        *bi, i, j = idx
        bi = tuple(bi)
        return te.sum(widen(a[(*batch_index(a, bi), i, r)]) * widen(b[(*batch_index(b, bi), r, j)]), axis=r)

    return stage((*batch, a.extents[-2], b.extents[-1]), product, name=name)
