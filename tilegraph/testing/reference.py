"""numpy float64 references of every op in tilegraph.ops, keyed by op name (REFERENCES).

Each reference takes numpy arrays (or Python scalars where the op accepts them) and the op's other
arguments, by the same names, and returns a float64 array. They are written independently of the te
definitions (e.g. transposed convolution scatters where the op gathers), so they can catch their bugs.

`reference_outputs(wl, inputs)` recomputes a whole workload built from tilegraph.ops, using the
records the ops leave on their outputs (see tilegraph/ops/_common.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tilegraph.ops import winograd as _winograd
from tilegraph.ops._common import attr, op_boundary
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor
from tilegraph.te.workload import Workload

IntOrTuple = int | Sequence[int]


def _special():  # noqa: ANN202 (scipy.special costs ~150 ms to import: only when a reference needs it)
    from scipy import special

    return special


def erf(x: np.ndarray) -> np.ndarray:
    return _special().erf(_f64(x))


def _f64(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _tuple(value: IntOrTuple, n: int) -> tuple[int, ...]:
    return (value,) * n if isinstance(value, int) else tuple(value)


def _contract_channels(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (..., C) @ w (C, O) as one 2-D product (numpy runs stacked matmuls slice by slice)."""
    flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    return (flat @ w).reshape(*x.shape[:-1], w.shape[-1])


def _window(padded: np.ndarray, start: Sequence[int], count: Sequence[int], step: Sequence[int],
            spatial_axes: Sequence[int]) -> np.ndarray:
    """padded sliced at start, start+step, ... (count points) along each spatial axis."""
    index = [slice(None)] * padded.ndim
    for axis, s0, n, st in zip(spatial_axes, start, count, step):
        index[axis] = slice(s0, s0 + (n - 1) * st + 1, st)
    return padded[tuple(index)]


# ---------------------------------------------------------------------------------------------
# Convolutions


def _conv_channels_last(x: np.ndarray, w: np.ndarray, stride: IntOrTuple, padding: IntOrTuple,
                        dilation: IntOrTuple, groups: int = 1, padding_after: IntOrTuple | None = None,
                        pad_value: float = 0.0) -> np.ndarray:
    x, w = _f64(x), _f64(w)  # integer operands too: their products summed exactly below 2**53
    dims = x.ndim - 2
    strides, pads, dils = _tuple(stride, dims), _tuple(padding, dims), _tuple(dilation, dims)
    after = pads if padding_after is None else _tuple(padding_after, dims)
    padded = np.pad(x, [(0, 0), *zip(pads, after), (0, 0)], constant_values=pad_value)
    kernel = w.shape[:dims]
    out_sp = [(padded.shape[1 + d] - dils[d] * (kernel[d] - 1) - 1) // strides[d] + 1 for d in range(dims)]
    ci, co = x.shape[-1], w.shape[-1]
    out = np.zeros((x.shape[0], *out_sp, co))
    offsets = list(np.ndindex(*kernel))
    # Offsets are taken in chunks so each matrix product has a reduction of ~128 (CI can be 3).
    chunk = max(1, 128 // ci) if groups == 1 else 1
    for first in range(0, len(offsets), chunk):
        part = offsets[first:first + chunk]
        patches = [_window(padded, [o * d for o, d in zip(offset, dils)], out_sp, strides, range(1, dims + 1))
                   for offset in part]
        if groups == 1:
            stacked = patches[0] if len(part) == 1 else np.concatenate(patches, axis=-1)
            out += _contract_channels(stacked, np.concatenate([w[offset] for offset in part], axis=0))
        else:
            grouped = patches[0].reshape(*patches[0].shape[:-1], groups, ci // groups)
            wg = w[part[0]].reshape(ci // groups, groups, co // groups)
            out += np.einsum("...gc,cgo->...go", grouped, wg).reshape(out.shape)
    return out


def conv1d_nlc(x: np.ndarray, w: np.ndarray, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
               dilation: IntOrTuple = 1) -> np.ndarray:
    return _conv_channels_last(x, w, stride, padding, dilation)


def conv2d_nhwc(x: np.ndarray, w: np.ndarray, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                dilation: IntOrTuple = 1, groups: int = 1, padding_after: IntOrTuple | None = None,
                accumulate: str | None = None, pad_value: float = 0.0) -> np.ndarray:  # float64 whatever the accumulation
    return _conv_channels_last(x, w, stride, padding, dilation, groups, padding_after, pad_value)


def conv3d_ndhwc(x: np.ndarray, w: np.ndarray, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1) -> np.ndarray:
    return _conv_channels_last(x, w, stride, padding, dilation)


def conv2d_nchw(x: np.ndarray, w: np.ndarray, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                dilation: IntOrTuple = 1) -> np.ndarray:
    nhwc = _conv_channels_last(_f64(x).transpose(0, 2, 3, 1), _f64(w).transpose(2, 3, 1, 0), stride, padding, dilation)
    return nhwc.transpose(0, 3, 1, 2)


def depthwise_conv2d_nhwc(x: np.ndarray, w: np.ndarray, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                          dilation: IntOrTuple = 1) -> np.ndarray:
    x, w = _f64(x), _f64(w)
    strides, pads, dils = _tuple(stride, 2), _tuple(padding, 2), _tuple(dilation, 2)
    padded = np.pad(x, [(0, 0), (pads[0], pads[0]), (pads[1], pads[1]), (0, 0)])
    kh, kw, c, mult = w.shape
    out_hw = [(padded.shape[1 + d] - dils[d] * (w.shape[d] - 1) - 1) // strides[d] + 1 for d in range(2)]
    out = np.zeros((x.shape[0], *out_hw, c, mult))
    for i, j in np.ndindex(kh, kw):
        patch = _window(padded, (i * dils[0], j * dils[1]), out_hw, strides, (1, 2))
        out += patch[..., None] * w[i, j]
    return out.reshape(x.shape[0], *out_hw, c * mult)


def conv2d_transpose_nhwc(x: np.ndarray, w: np.ndarray, stride: IntOrTuple = 1, padding: IntOrTuple = 0) -> np.ndarray:
    """Scatter form: every input point adds x * w[kh, kw] at (y*s + kh - p, x*s + kw - p)."""
    x, w = _f64(x), _f64(w)
    (sh, sw), (ph, pw) = _tuple(stride, 2), _tuple(padding, 2)
    n, h, wd, _ = x.shape
    kh, kw, _, co = w.shape
    full = np.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, co))
    for i, j in np.ndindex(kh, kw):
        full[:, i:i + (h - 1) * sh + 1:sh, j:j + (wd - 1) * sw + 1:sw, :] += _contract_channels(x, w[i, j])
    return full[:, ph:full.shape[1] - ph, pw:full.shape[2] - pw, :]


def conv2d_capsule_nhwijc(x: np.ndarray, w: np.ndarray, stride: int = 1, padding: int = 0,
                          capsule_size: int = 4) -> np.ndarray:
    x, w = _f64(x), _f64(w)
    padded = np.pad(x, [(0, 0), (padding, padding), (padding, padding), (0, 0), (0, 0), (0, 0)])
    k = w.shape[0]
    out_hw = [(padded.shape[1 + d] - k) // stride + 1 for d in range(2)]
    out = np.zeros((x.shape[0], *out_hw, capsule_size, capsule_size, w.shape[-1]))
    for i, j in np.ndindex(k, k):
        patch = _window(padded, (i, j), out_hw, (stride, stride), (1, 2))
        out += np.einsum("nhwikc,kjco->nhwijo", patch, w[i, j])
    return out


# ---------------------------------------------------------------------------------------------
# Matrix products, pooling, normalisation


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, transpose_a: bool = False,
           transpose_b: bool = False, accumulate: str | None = None) -> np.ndarray:
    a, b = _f64(a), _f64(b)
    out = (a.T if transpose_a else a) @ (b.T if transpose_b else b)
    return out if bias is None else out + _f64(bias)


def dense(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    return matmul(x, w, bias, transpose_b=True)


def batch_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(_f64(a), _f64(b))


def _pool(x: np.ndarray, kernel: IntOrTuple, stride: IntOrTuple, padding: IntOrTuple, layout: str,
          fill: float, combine: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    ks, ss, ps = _tuple(kernel, 2), _tuple(stride, 2), _tuple(padding, 2)
    pad_width = [(0, 0)] * 4
    for a, p in zip(axes, ps):
        pad_width[a] = (p, p)
    padded = np.pad(x, pad_width, constant_values=fill)
    out_hw = [(padded.shape[a] - k) // s + 1 for a, k, s in zip(axes, ks, ss)]
    out = None
    for i, j in np.ndindex(*ks):
        patch = _window(padded, (i, j), out_hw, ss, axes)
        out = patch.copy() if out is None else combine(out, patch)
    return out


def max_pool2d(x: np.ndarray, kernel: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
               layout: str = "NHWC") -> np.ndarray:
    return _pool(_f64(x), kernel, stride, padding, layout, -np.inf, np.maximum)


def avg_pool2d(x: np.ndarray, kernel: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
               layout: str = "NHWC") -> np.ndarray:
    """Mean over the window points inside x (count_include_pad=False)."""
    total = _pool(_f64(x), kernel, stride, padding, layout, 0.0, np.add)
    count = _pool(np.ones_like(x, dtype=np.float64), kernel, stride, padding, layout, 0.0, np.add)
    return total / count


def global_avg_pool2d(x: np.ndarray, layout: str = "NHWC") -> np.ndarray:
    return _f64(x).mean(axis=(1, 2) if layout == "NHWC" else (2, 3), keepdims=True)


def _axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(a % ndim for a in ((axis,) if isinstance(axis, int) else axis)))


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axis: int | Sequence[int] = -1,
               epsilon: float = 1e-5) -> np.ndarray:
    x = _f64(x)
    axes = _axes(axis, x.ndim)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [x.shape[d] if d in axes else 1 for d in range(x.ndim)]
    return (x - mean) / np.sqrt(var + epsilon) * _f64(gamma).reshape(shape) + _f64(beta).reshape(shape)


def batch_norm(x: np.ndarray, mean: np.ndarray, var: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
               axis: int = 1, epsilon: float = 1e-5) -> np.ndarray:
    x = _f64(x)
    shape = [1] * x.ndim
    shape[axis % x.ndim] = x.shape[axis % x.ndim]
    mean, var, gamma, beta = (_f64(t).reshape(shape) for t in (mean, var, gamma, beta))
    return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def norm_bmn(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.square(_f64(x)).sum(axis=(1, 2)))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return _special().softmax(_f64(x), axis=axis)


# ---------------------------------------------------------------------------------------------
# Elementwise, reductions, data movement, subgraphs


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(_f64(x), 0.0)


def gelu(x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    return 0.5 * x * (1.0 + _special().erf(x / np.sqrt(2.0)))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return _special().expit(_f64(x))


def tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(_f64(x))


def exp(x: np.ndarray) -> np.ndarray:
    return np.exp(_f64(x))


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def reference(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
        return fn(_f64(a), _f64(b))

    return reference


def _remainder(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    """np.mod or np.fmod; integers: 0 where b is 0 (ops.mod, ops.fmod), computed exactly in int64."""
    def reference(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
        a_, b_ = np.asarray(a), np.asarray(b)
        if a_.dtype.kind in "iu" and b_.dtype.kind in "iu":
            a64, b64 = a_.astype(np.int64), b_.astype(np.int64)
            return np.where(b64 == 0, 0, fn(a64, np.where(b64 == 0, 1, b64))).astype(np.float64)
        return fn(_f64(a), _f64(b))

    return reference


def shift(a: np.ndarray | int, b: np.ndarray | int, left: bool) -> np.ndarray:
    """a << b or a >> b; amounts outside [0, bits): 0, or (right, signed) the sign fill (ops.shl/shr)."""
    a_, b_ = np.asarray(a), np.asarray(b)
    bits = a_.dtype.itemsize * 8
    inside = (b_ >= 0) & (b_ < bits)
    safe = np.where(inside, b_, 0).astype(a_.dtype)
    shifted = np.left_shift(a_, safe) if left else np.right_shift(a_, safe)
    fill = np.where(a_ < 0, -1, 0).astype(a_.dtype) if not left and a_.dtype.kind == "i" else np.zeros_like(a_)
    return np.where(inside, shifted, fill)


def div(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """a / b; integers: truncated toward zero, 0 where b is 0 (ops.div)."""
    a_, b_ = np.asarray(a), np.asarray(b)
    if a_.dtype.kind in "iub" and b_.dtype.kind in "iub":
        a64, b64 = a_.astype(np.int64), b_.astype(np.int64)
        safe = np.where(b64 == 0, 1, b64)
        q = np.abs(a64) // np.abs(safe) * np.sign(a64) * np.sign(safe)
        return np.where(b64 == 0, 0, q).astype(np.result_type(a_, b_)).astype(np.float64)  # wraps as C does
    return np.divide(_f64(a), _f64(b))


def _reduction(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def reference(x: np.ndarray, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> np.ndarray:
        x = _f64(x)
        out = np.asarray(fn(x, axis=_axes(axis, x.ndim), keepdims=keepdims))
        return out.reshape(1) if out.ndim == 0 else out

    return reference


def reshape(x: np.ndarray, newshape: Sequence[int]) -> np.ndarray:
    return np.reshape(_f64(x), tuple(newshape))


def transpose(x: np.ndarray, axes: Sequence[int] | None = None) -> np.ndarray:
    return np.transpose(_f64(x), axes)


def conv2d_bn_relu(x: np.ndarray, w: np.ndarray, bias: np.ndarray, bn_scale: np.ndarray, bn_offset: np.ndarray,
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1) -> np.ndarray:
    conv = conv2d_nhwc(x, w, stride, padding, dilation)
    return np.maximum((conv + _f64(bias)) * _f64(bn_scale) + _f64(bn_offset), 0.0)


def transpose_batch_matmul(query: np.ndarray, value: np.ndarray) -> np.ndarray:
    return np.einsum("blhd,bmhd->bhlm", _f64(query), _f64(value))


# ---------------------------------------------------------------------------------------------
# ops/math.py and ops/indexing.py (the graph level's extra ops); comparisons give bool arrays,
# data movement keeps integer values exact.


def _float_fn(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def reference(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(_f64(x))

    return reference


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def hard_sigmoid(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    return np.clip(alpha * _f64(x) + beta, 0.0, 1.0)


def hard_swish(x: np.ndarray) -> np.ndarray:
    return _f64(x) * hard_sigmoid(x, 1.0 / 6.0, 0.5)


def clip(x: np.ndarray, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    out = np.asarray(x)
    if lo is not None:
        out = np.maximum(out, lo)
    if hi is not None:
        out = np.minimum(out, hi)
    return out


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(dtype)


def concat(xs: Sequence[np.ndarray], axis: int = 0) -> np.ndarray:
    return np.concatenate([np.asarray(x) for x in xs], axis=axis)


def strided_slice(x: np.ndarray, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None) -> np.ndarray:
    steps = strides if strides is not None else (1,) * len(begin)
    return np.asarray(x)[tuple(slice(b, e, s) for b, e, s in zip(begin, end, steps))]


def take(x: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    return np.take(np.asarray(x), np.asarray(indices, dtype=np.int64), axis=axis)


def gather_elements(x: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    x, indices = np.asarray(x), np.asarray(indices, dtype=np.int64)
    return np.take_along_axis(x, np.where(indices < 0, indices + x.shape[axis], indices), axis=axis)


def broadcast_to(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return np.broadcast_to(np.asarray(x), tuple(shape)).copy()


def pad_constant(x: np.ndarray, before: Sequence[int], after: Sequence[int], value: float = 0.0) -> np.ndarray:
    x = np.asarray(x)
    crop = tuple(slice(max(-b, 0), n - max(-a, 0)) for n, b, a in zip(x.shape, before, after))
    widths = [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    return np.pad(x[crop], widths, constant_values=value)


MORE_REFERENCES: dict[str, Callable[..., np.ndarray]] = {
    "sqrt": _float_fn(np.sqrt), "erf": erf, "log": _float_fn(np.log), "neg": lambda x: np.negative(x),
    "abs": _float_fn(np.abs), "reciprocal": _float_fn(lambda x: 1.0 / x), "gelu_tanh": gelu_tanh,
    "hard_sigmoid": hard_sigmoid, "hard_swish": hard_swish, "clip": clip, "isnan": _float_fn(np.isnan),
    "logical_not": lambda x: np.logical_not(x), "cast": cast, "power": _binary(np.power),
    "equal": lambda a, b: np.equal(a, b), "less": lambda a, b: np.less(a, b), "greater": lambda a, b: np.greater(a, b),
    "less_equal": lambda a, b: np.less_equal(a, b), "greater_equal": lambda a, b: np.greater_equal(a, b),
    "logical_and": lambda a, b: np.logical_and(a, b), "logical_or": lambda a, b: np.logical_or(a, b),
    "where": lambda cond, a, b: np.where(cond, a, b), "concat": concat, "strided_slice": strided_slice, "take": take,
    "gather_elements": gather_elements, "matmul_nd": lambda a, b, accumulate=None: np.matmul(_f64(a), _f64(b)),
    "broadcast_to": broadcast_to, "pad_constant": pad_constant, "mod": _remainder(np.mod), "fmod": _remainder(np.fmod),
    "bitand": lambda a, b: np.bitwise_and(a, b), "bitor": lambda a, b: np.bitwise_or(a, b),
    "bitxor": lambda a, b: np.bitwise_xor(a, b), "shl": lambda a, b: shift(a, b, True),
    "shr": lambda a, b: shift(a, b, False),
}


def attention(q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
              scale: float | None = None, divide: bool = False, nan_to_zero: bool = False) -> np.ndarray:
    x = _f64(q) @ _f64(kt)
    if scale is not None:
        x = x / scale if divide else x * scale
    if mask is not None:
        x = x + _f64(mask)
    p = softmax(x, -1)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0.0, p)
    return p @ _f64(v)


def winograd_input_nhwc(x: np.ndarray, m: int = 4, pads: Sequence[int] = (1, 1, 1, 1),
                        out_hw: Sequence[int] | None = None) -> np.ndarray:
    """(alpha, alpha, N * TH * TW, C): Bᵀ d B of every tile's (m + 2)-square input window d."""
    n, h, w, c = x.shape
    top, left, bottom, right = pads
    oh, ow = (h + top + bottom - 2, w + left + right - 2) if out_hw is None else out_hw
    th, tw = _winograd.tiles((oh, ow), m)
    alpha = m + 2
    # zeros past the padding too: the last tiles' windows may reach beyond it
    padded = np.zeros((n, th * m + 2, tw * m + 2, c))
    rows, cols = min(h, th * m + 2 - top), min(w, tw * m + 2 - left)
    padded[:, top:top + rows, left:left + cols] = _f64(x)[:, :rows, :cols]
    windows = np.stack([np.stack([padded[:, i:i + th * m:m, j:j + tw * m:m] for j in range(alpha)], 3)
                        for i in range(alpha)], 3)  # (n, th, tw, alpha_i, alpha_j, c)
    _, _, bt = _winograd.matrices(m)
    v = np.einsum("ai,nyzijc,bj->abnyzc", bt, windows, bt)
    return v.reshape(alpha, alpha, n * th * tw, c)


def winograd_output_nhwc(mm: np.ndarray, m: int = 4, n: int = 1, out_hw: Sequence[int] = (1, 1)) -> np.ndarray:
    """(N, OH, OW, K): Aᵀ M A of every tile, the tiles laid side by side and cut to (OH, OW)."""
    oh, ow = out_hw
    th, tw = _winograd.tiles((oh, ow), m)
    at, _, _ = _winograd.matrices(m)
    alpha, k = m + 2, mm.shape[3]
    y = np.einsum("ia,abnyzk,jb->nyizjk", at, _f64(mm).reshape(alpha, alpha, n, th, tw, k), at)
    return y.reshape(n, th * m, tw * m, k)[:, :oh, :ow]


REFERENCES: dict[str, Callable[..., np.ndarray]] = {
    "attention": attention, "winograd_input_nhwc": winograd_input_nhwc, "winograd_output_nhwc": winograd_output_nhwc,
    "conv1d_nlc": conv1d_nlc, "conv2d_nhwc": conv2d_nhwc, "conv3d_ndhwc": conv3d_ndhwc, "conv2d_nchw": conv2d_nchw,
    "depthwise_conv2d_nhwc": depthwise_conv2d_nhwc, "conv2d_transpose_nhwc": conv2d_transpose_nhwc,
    "conv2d_capsule_nhwijc": conv2d_capsule_nhwijc, "matmul": matmul, "dense": dense, "batch_matmul": batch_matmul,
    "max_pool2d": max_pool2d, "avg_pool2d": avg_pool2d, "global_avg_pool2d": global_avg_pool2d,
    "layer_norm": layer_norm, "batch_norm": batch_norm, "norm_bmn": norm_bmn, "softmax": softmax,
    "relu": relu, "gelu": gelu, "sigmoid": sigmoid, "tanh": tanh, "exp": exp,
    "add": _binary(np.add), "sub": _binary(np.subtract), "mul": _binary(np.multiply), "div": div,
    "maximum": _binary(np.maximum), "minimum": _binary(np.minimum),
    "sum": _reduction(np.sum), "mean": _reduction(np.mean), "max": _reduction(np.max), "min": _reduction(np.min),
    "prod": _reduction(np.prod),
    "reshape": reshape, "transpose": transpose,
    "conv2d_bn_relu": conv2d_bn_relu, "transpose_batch_matmul": transpose_batch_matmul,
    **MORE_REFERENCES,
}

# Arguments whose random test values must be positive (and away from 0): variances, divisors.
POSITIVE_ARGS: dict[str, frozenset[str]] = {
    "batch_norm": frozenset({"var"}), "div": frozenset({"b"}), "sqrt": frozenset({"x"}), "log": frozenset({"x"}),
    "reciprocal": frozenset({"x"}), "power": frozenset({"a"}),
}


def reference_outputs(wl: Workload, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """float64 outputs of `wl` for `inputs`, recomputed op by op from REFERENCES.

    Raises LookupError when some tensor on the way was not built by tilegraph.ops.
    """
    if len(inputs) != len(wl.inputs):
        raise ValueError(f"argument inputs has {len(inputs)} arrays; workload {wl.op_name} takes {len(wl.inputs)}")
    if wl.dims_at:  # the ops' references compute over the storage shapes: right only at the dims' uppers
        raise LookupError(f"workload {wl.op_name} runs its dims below their upper bounds; the op references cannot")
    values: dict[int, np.ndarray] = {id(t): np.asarray(a) for t, a in zip(wl.inputs, inputs)}
    for t in wl.inputs:
        if values[id(t)].shape != t.shape:
            raise ValueError(f"input {t.name} must have shape {t.shape}, got {values[id(t)].shape}")

    def value(t: Tensor) -> np.ndarray:
        if id(t) not in values:
            values[id(t)] = _evaluate(t, value)
        return values[id(t)]

    return [np.asarray(value(t), dtype=np.float64) for t in wl.outputs]


def _evaluate(t: Tensor, value: Callable[[Tensor], np.ndarray]) -> np.ndarray:
    op_name = attr(t, "ref_op")
    if op_name is None or op_name not in REFERENCES:
        raise LookupError(f"tensor {t.name} was not built by tilegraph.ops, so it has no numpy reference")
    boundary = op_boundary(t)
    kwargs: dict[str, object] = dict(attr(t, "ref_params", ()))  # type: ignore[arg-type]
    if any(isinstance(v, Expr) or isinstance(v, (tuple, list)) and any(isinstance(x, Expr) for x in v)
           for v in kwargs.values()):
        raise LookupError(f"tensor {t.name} has a run-time dim among its op's parameters: no numpy reference")
    for arg_name, position in attr(t, "ref_args", ()):  # type: ignore[attr-defined]
        kwargs[arg_name] = (value(boundary[position]) if isinstance(position, int)
                            else [value(boundary[p]) for p in position])
    out = np.asarray(REFERENCES[op_name](**kwargs), dtype=np.float64)
    if out.shape != t.shape:
        raise RuntimeError(f"reference of {op_name} gave shape {out.shape}, tensor {t.name} has {t.shape}")
    return out
