"""Scaled dot-product attention as one operator: the scores, their softmax and the product with V in
one workload, so one kernel runs a block of query rows end to end while its scores stay in cache
(graph/passes/fuse_attention.py makes it from the unfused graph; schedule/attention.py schedules it).

    attention(q, kt, v, mask=None, scale=None, divide=False, nan_to_zero=False)
      q (*B, S, D), kt (*B, D, T), v (*B, T, E), mask broadcastable to (*B, S, T)  ->  (*B, S, E)

    kt'[b, d, j]   = kt[b, d, j]                  (a copy the schedule makes once per head)
    qk[b, i, j]    = sum_d q[b, i, d] * kt'[b, d, j]
    x[b, i, j]     = qk * scale (qk / scale with divide) + mask[b, i, j]      (inlined where read)
    max[b, i]      = max_j x
    exp[b, i, j]   = exp(x - max)
    expsum[b, i]   = sum_j exp
    p[b, i, j]     = exp / expsum, or 0 where that is NaN (nan_to_zero: a row masked with -inf
                     everywhere, as torch's exporter guards it with IsNaN/Where)
    out[b, i, e]   = sum_j p[b, i, j] * v[b, j, e]

The stages are the unfused graph's, in its order (ops/softmax.py's four stages between the two
products), so the operator computes what the graph did, NaN included: a fully masked row without
nan_to_zero is NaN in both.
"""

from __future__ import annotations

from tilegraph import te
from tilegraph.ops._common import check_float, check_tensor, operator, same_dtype, stage
from tilegraph.ops.elementwise import broadcast_read
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor


@operator("attention")
def attention(q: Tensor, kt: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None,
              divide: bool = False, nan_to_zero: bool = False, name: str = "attention") -> Tensor:
    """softmax(q @ kt * scale + mask) @ v over the last two axes; leading axes are batches."""
    for arg, t in (("q", q), ("kt", kt), ("v", v)):
        check_tensor(t, arg)
        check_float(t, arg)
        if t.ndim < 2:
            raise ValueError(f"argument {arg} must have at least 2 dimensions, got shape {t.shape}")
    tensors = {"q": q, "kt": kt, "v": v}
    if mask is not None:
        check_tensor(mask, "mask")
        tensors["mask"] = mask
    same_dtype(tensors)
    *batch, s, d = q.shape
    if tuple(kt.shape[:-2]) != tuple(batch) or tuple(v.shape[:-2]) != tuple(batch):
        raise ValueError(f"arguments q {q.shape}, kt {kt.shape} and v {v.shape} must share their leading (batch) axes")
    if kt.shape[-2] != d:
        raise ValueError(f"argument kt {kt.shape} must have q's depth {d} as its second-to-last extent")
    t_len, e_len = kt.shape[-1], v.shape[-1]
    if v.shape[-2] != t_len:
        raise ValueError(f"argument v {v.shape} must have kt's key count {t_len} as its second-to-last extent")
    scores_shape = (*batch, s, t_len)
    if mask is not None:
        if mask.ndim > len(scores_shape) or any(
                m not in (1, o) for m, o in zip(reversed(mask.shape), reversed(scores_shape))):
            raise ValueError(f"argument mask {mask.shape} does not broadcast to the scores {scores_shape}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"argument scale must be a number or None, got {type(scale).__name__}")
    nb = len(batch)
    rows_shape = (*batch, s)

    # kt copied as a stage of its own: the schedule packs it once per head (contiguous along the
    # keys, whatever layout the projection wrote), the inlined prologue reading the source once
    kt_copy = stage(kt.shape, lambda *i: kt[i], name=f"{name}_kt")
    rd = te.reduce_axis(d, "rd")
    qk = stage(scores_shape, lambda *i: te.sum(q[(*i[:nb], i[nb], rd)] * kt_copy[(*i[:nb], rd, i[nb + 1])], axis=rd),
               name=f"{name}_qk")

    def logits(idx: tuple[Expr, ...]) -> Expr:
        x = qk[idx]
        if scale is not None:
            c = te.const(float(scale), q.dtype)
            x = x / c if divide else x * c
        return x + broadcast_read(mask, idx) if mask is not None else x

    rm = te.reduce_axis(t_len, "rj")
    row_max = stage(rows_shape, lambda *o: te.max(logits((*o, rm)), axis=rm), name=f"{name}_max")
    exps = stage(scores_shape, lambda *i: te.exp(logits(i) - row_max[i[:-1]]), name=f"{name}_exp")
    rs = te.reduce_axis(t_len, "rj")
    expsum = stage(rows_shape, lambda *o: te.sum(exps[(*o, rs)], axis=rs), name=f"{name}_expsum")

    def probability(*i: Expr) -> Expr:
        p = exps[i] / expsum[i[:-1]]
        return te.select(p.ne(p), te.const(0.0, q.dtype), p) if nan_to_zero else p

    probs = stage(scores_shape, probability, name=f"{name}_p")
    rv = te.reduce_axis(t_len, "rv")
    return stage((*batch, s, e_len),
                 lambda *i: te.sum(probs[(*i[:-1], rv)] * v[(*i[:nb], rv, i[-1])], axis=rv), name=name)
