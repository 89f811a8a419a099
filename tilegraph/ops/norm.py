"""Normalisations.

    layer_norm(x, gamma, beta, axis)   three stages over the normalised axes A (n = their size,
        s[o] = x[o, first of A], the shift):
        m[o] = sum_A (x[o, A] - s[o]) / n   (the mean is s[o] + m[o]);   d[o, A] = (x[o, A] - s[o]) - m[o]
        var[o] = sum_A d[o, A]^2 / n;   out[o, A] = d[o, A] * rsqrt(var[o] + epsilon) * gamma[A] + beta[A]
    batch_norm(x, mean, var, gamma, beta, axis)   inference, one stage, per channel c = index[axis]:
        out = (x - mean[c]) * rsqrt(var[c] + epsilon) * gamma[c] + beta[c]
    norm_bmn(x)   x (B, M, N): out[b] = sqrt(sum_{m, n} x[b, m, n]^2)   (two stages)
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph import te
from tilegraph.ops._common import check_float, check_tensor, normalize_axes, normalize_axis, operator, same_dtype, stage
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor


def _check_epsilon(epsilon: float) -> None:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
        raise ValueError(f"argument epsilon must be a non-negative number, got {epsilon!r}")


@operator("layer_norm")
def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, axis: int | Sequence[int] = -1, epsilon: float = 1e-5,
               name: str = "layer_norm") -> Tensor:
    """Normalise over `axis` (an int or several axes); gamma and beta have the normalised axes' shape."""
    check_tensor(x, "x")
    check_float(x, "x")
    axes = normalize_axes(axis, x.ndim)
    _check_epsilon(epsilon)
    norm_shape = tuple(x.shape[a] for a in axes)
    if any(not isinstance(x.extents[a], int) for a in axes):
        raise ValueError(f"layer_norm normalises over static extents only; axis={axis!r} of x has run-time extents "
                         f"{[str(x.extents[a]) for a in axes]}")
    for arg, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(t, arg)
        if t.bounds:
            raise ValueError(f"argument {arg} of layer_norm must have static extents")
        if t.shape != norm_shape:
            raise ValueError(f"argument {arg} must have the normalised shape {norm_shape} (axis={axis!r}), got {t.shape}")
    same_dtype({"x": x, "gamma": gamma, "beta": beta})
    outer = tuple(d for d in range(x.ndim) if d not in axes)
    outer_shape = tuple(x.extents[d] for d in outer) or (1,)
    count = 1
    for s in norm_shape:
        count *= s
    inv_count = 1.0 / count

    def full_index(outer_idx: Sequence[Expr], inner_idx: Sequence[Expr]) -> tuple[Expr, ...]:
        it_outer, it_inner = iter(outer_idx), iter(inner_idx)
        return tuple(next(it_inner) if d in axes else next(it_outer) for d in range(x.ndim))

    def outer_of(idx: Sequence[Expr]) -> tuple[Expr, ...]:
        return tuple(idx[d] for d in outer) or (0,)

    def reduce_axes() -> tuple[te.IterVar, ...]:
        return tuple(te.reduce_axis(x.shape[a], f"r{a}") for a in axes)

    # Shifted data: the mean is accumulated over x - x[o, first] (exact for constant rows, small for
    # rows far from zero), then shifted back. Summing x * fp32(1/n) directly gave 0.78 instead of
    # 0 for constant rows of 1e4 over 768 columns, after cancellation in the variance.
    def shift(o: Sequence[Expr]) -> Expr:
        return x[full_index(o if outer else (), [0] * len(axes))]

    r_mean = reduce_axes()
    shifted_mean = stage(
        outer_shape, lambda *o: te.sum((x[full_index(o if outer else (), r_mean)] - shift(o)) * inv_count, axis=r_mean),
        name=f"{name}_mean")

    def centred(value: Expr, o: Sequence[Expr]) -> Expr:
        # (x - s) - shifted_mean, never x - (s + shifted_mean): s + shifted_mean would round at the
        # magnitude of s (5e-4 at 1e4), while x - s is exact for values near s
        return (value - shift(o)) - shifted_mean[tuple(o)]

    r_var = reduce_axes()

    def variance(*o: Expr) -> Expr:
        d = centred(x[full_index(o if outer else (), r_var)], o)
        return te.sum(d * d * inv_count, axis=r_var)

    var = stage(outer_shape, variance, name=f"{name}_var")

    def normalised(*idx: Expr) -> Expr:
        o = outer_of(idx)
        inner = tuple(idx[a] for a in axes)
        return centred(x[idx], o) * te.rsqrt(var[o] + epsilon) * gamma[inner] + beta[inner]

    return stage(x.extents, normalised, name=name)


@operator("batch_norm")
def batch_norm(x: Tensor, mean: Tensor, var: Tensor, gamma: Tensor, beta: Tensor, axis: int = 1,
               epsilon: float = 1e-5, name: str = "batch_norm") -> Tensor:
    """Inference batch normalisation with per-channel statistics along `axis` (the channel axis)."""
    check_tensor(x, "x")
    check_float(x, "x")
    channel_axis = normalize_axis(axis, x.ndim)
    _check_epsilon(epsilon)
    channels = x.shape[channel_axis]
    if x.bounds and x.bounds[channel_axis] is not None:
        raise ValueError(f"argument x has a run-time extent on its channel axis {channel_axis}; "
                         "batch_norm's statistics are per static channel")
    params = {"mean": mean, "var": var, "gamma": gamma, "beta": beta}
    for arg, t in params.items():
        check_tensor(t, arg)
        if t.shape != (channels,):
            raise ValueError(f"argument {arg} must have shape ({channels},) (x channels along axis={axis}), got {t.shape}")
    same_dtype({"x": x, **params})

    def body(*idx: Expr) -> Expr:
        c = idx[channel_axis]
        return (x[idx] - mean[c]) * te.rsqrt(var[c] + epsilon) * gamma[c] + beta[c]

    return stage(x.extents, body, name=name)


@operator("norm_bmn")
def norm_bmn(x: Tensor, name: str = "norm_bmn") -> Tensor:
    """Frobenius norm of each matrix of a batch: x (B, M, N) -> (B,)."""
    check_tensor(x, "x", 3)
    check_float(x, "x")
    batch, m, n = x.shape
    i, j = te.reduce_axis(m, "i"), te.reduce_axis(n, "j")
    squares = stage((batch,), lambda b: te.sum(x[b, i, j] * x[b, i, j], axis=(i, j)), name=f"{name}_sumsq")
    return stage((batch,), lambda b: te.sqrt(squares[b]), name=name)
