"""Every operator, built through the C backend with its default schedule, matches the float64
numpy reference on random inputs; so does every suite workload at its reduced size.

Extents are tiny but chosen odd, prime or 1 so that vector tails, guards and unit loops are all
exercised. Outputs are poisoned with NaN before the call, so an element the kernel never writes
fails the check. The error measure is max|got - want| / max|want| per output (fp32 vs float64).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te, workloads
from tilegraph.ops._common import attr
from tilegraph.testing import random_inputs, reference_outputs

pytestmark = pytest.mark.needs_cc

MAX_RELATIVE_ERROR = 1e-4


def _ph(shape: tuple[int, ...], name: str) -> te.Tensor:
    return te.placeholder(shape, "float32", name)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max|got - want| / max|want| (NaN anywhere in `got` gives inf)."""
    if np.isnan(got).any():
        return float("inf")
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0)) / scale


def check_compiled(wl: tg.Workload, seed: int = 0) -> None:
    kernel = tg.build(wl)
    arrays = random_inputs(wl, seed)
    want = reference_outputs(wl, arrays)
    outs = [np.full(b.shape, np.nan, b.dtype.numpy) for b in kernel.outputs]
    kernel(*arrays, out=outs[0] if len(outs) == 1 else outs)
    assert len(outs) == len(want)
    for got, ref, t in zip(outs, want, wl.outputs):
        assert got.shape == ref.shape, t.name
        err = relative_error(got, ref)
        assert err < MAX_RELATIVE_ERROR, f"{t.name}: relative error {err:.3g}\n{kernel.source[-3000:]}"


def _unary(op: Callable[..., te.Tensor], shape: tuple[int, ...], **kw: object) -> Callable[[], tuple]:
    def make() -> tuple:
        x = _ph(shape, "x")
        return [x], op(x, **kw)

    return make


def _binary(op: Callable[..., te.Tensor], a_shape: tuple[int, ...] | None, b_shape: tuple[int, ...] | None,
            scalar: float = 1.5) -> Callable[[], tuple]:
    def make() -> tuple:
        a = _ph(a_shape, "a") if a_shape is not None else None
        b = _ph(b_shape, "b") if b_shape is not None else None
        inputs = [t for t in (a, b) if t is not None]
        return inputs, op(a if a is not None else scalar, b if b is not None else scalar)

    return make


def _conv_nhwc(n: int, h: int, w: int, ci: int, co: int, k: int, stride: int = 1, pad: int = 0,
               dilation: int = 1, groups: int = 1) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, h, w, ci), "x"), _ph((k, k, ci // groups, co), "w")
        return [x, wt], ops.conv2d_nhwc(x, wt, stride, pad, dilation, groups)

    return make


def _conv1d(n: int, length: int, ci: int, co: int, k: int, stride: int, pad: int, dilation: int) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, length, ci), "x"), _ph((k, ci, co), "w")
        return [x, wt], ops.conv1d_nlc(x, wt, stride, pad, dilation)

    return make


def _conv3d(shape: tuple[int, ...], co: int, k: int, stride: int, pad: int, dilation: int = 1) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph(shape, "x"), _ph((k, k, k, shape[-1], co), "w")
        return [x, wt], ops.conv3d_ndhwc(x, wt, stride, pad, dilation)

    return make


def _conv_nchw(n: int, c: int, h: int, w: int, co: int, k: int, stride: int, pad: int,
               dilation: int = 1) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, c, h, w), "x"), _ph((co, c, k, k), "w")
        return [x, wt], ops.conv2d_nchw(x, wt, stride, pad, dilation)

    return make


def _depthwise(n: int, h: int, w: int, c: int, mult: int, k: int, stride: int, pad: int,
               dilation: int = 1) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, h, w, c), "x"), _ph((k, k, c, mult), "w")
        return [x, wt], ops.depthwise_conv2d_nhwc(x, wt, stride, pad, dilation)

    return make


def _transposed(n: int, h: int, w: int, ci: int, co: int, k: int, stride: int, pad: int) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, h, w, ci), "x"), _ph((k, k, ci, co), "w")
        return [x, wt], ops.conv2d_transpose_nhwc(x, wt, stride, pad)

    return make


def _capsule(n: int, h: int, w: int, cap: int, ci: int, co: int, k: int, stride: int, pad: int) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, h, w, cap, cap, ci), "x"), _ph((k, k, cap, cap, ci, co), "w")
        return [x, wt], ops.conv2d_capsule_nhwijc(x, wt, stride, pad, cap)

    return make


def _matmul(m: int, k: int, n: int, bias: bool = False, transpose_a: bool = False,
            transpose_b: bool = False) -> Callable[[], tuple]:
    def make() -> tuple:
        a = _ph((k, m) if transpose_a else (m, k), "a")
        b = _ph((n, k) if transpose_b else (k, n), "b")
        inputs = [a, b]
        bias_t = None
        if bias:
            bias_t = _ph((n,), "bias")
            inputs.append(bias_t)
        return inputs, ops.matmul(a, b, bias_t, transpose_a, transpose_b)

    return make


def _dense(m: int, k: int, n: int, bias: bool) -> Callable[[], tuple]:
    def make() -> tuple:
        x, w = _ph((m, k), "x"), _ph((n, k), "w")
        b = _ph((n,), "bias") if bias else None
        return [x, w] + ([b] if b is not None else []), ops.dense(x, w, b)

    return make


def _batch_matmul(b: int, n: int, m: int, k: int) -> Callable[[], tuple]:
    def make() -> tuple:
        x, y = _ph((b, n, k), "a"), _ph((b, k, m), "b")
        return [x, y], ops.batch_matmul(x, y)

    return make


def _pool(op: Callable[..., te.Tensor], shape: tuple[int, ...], k: int | tuple[int, int],
          stride: int | tuple[int, int], pad: int | tuple[int, int], layout: str) -> Callable[[], tuple]:
    def make() -> tuple:
        x = _ph(shape, "x")
        return [x], op(x, k, stride, pad, layout)

    return make


def _global_pool(shape: tuple[int, ...], layout: str) -> Callable[[], tuple]:
    def make() -> tuple:
        x = _ph(shape, "x")
        return [x], ops.global_avg_pool2d(x, layout)

    return make


def _layer_norm(shape: tuple[int, ...], axis: int | tuple[int, ...]) -> Callable[[], tuple]:
    def make() -> tuple:
        axes = (axis,) if isinstance(axis, int) else axis
        norm_shape = tuple(shape[a] for a in axes)
        x, g, b = _ph(shape, "x"), _ph(norm_shape, "gamma"), _ph(norm_shape, "beta")
        return [x, g, b], ops.layer_norm(x, g, b, axis)

    return make


def _batch_norm(shape: tuple[int, ...], axis: int) -> Callable[[], tuple]:
    def make() -> tuple:
        x = _ph(shape, "x")
        stats = [_ph((shape[axis],), n) for n in ("mean", "var", "gamma", "beta")]
        return [x, *stats], ops.batch_norm(x, *stats, axis=axis)

    return make


def _cbr(n: int, h: int, w: int, ci: int, co: int, k: int, stride: int, pad: int,
         dilation: int = 1) -> Callable[[], tuple]:
    def make() -> tuple:
        x, wt = _ph((n, h, w, ci), "x"), _ph((k, k, ci, co), "w")
        extra = [_ph((co,), name) for name in ("bias", "bn_scale", "bn_offset")]
        return [x, wt, *extra], ops.conv2d_bn_relu(x, wt, *extra, stride, pad, dilation)

    return make


def _tbg(b: int, seq: int, heads: int, dim: int) -> Callable[[], tuple]:
    def make() -> tuple:
        q, v = _ph((b, seq, heads, dim), "query"), _ph((b, seq, heads, dim), "value")
        return [q, v], ops.transpose_batch_matmul(q, v)

    return make


OP_CASES: dict[str, Callable[[], tuple]] = {
    # elementwise
    "relu": _unary(ops.relu, (3, 17)),
    "relu_wide_prime": _unary(ops.relu, (2, 131)),  # > 64: split with a guarded vector tail
    "gelu": _unary(ops.gelu, (2, 19)),
    "sigmoid": _unary(ops.sigmoid, (1, 7, 5)),
    "tanh": _unary(ops.tanh, (13,)),
    "exp": _unary(ops.exp, (5, 1, 11)),
    "add": _binary(ops.add, (3, 13), (3, 13)),
    "add_broadcast_row": _binary(ops.add, (5, 7), (7,)),
    "sub_broadcast_both": _binary(ops.sub, (5, 1, 3), (1, 7, 3)),
    "mul_scalar_right": _binary(ops.mul, (2, 11), None),
    "div_scalar_left": _binary(ops.div, None, (3, 5)),
    "div": _binary(ops.div, (4, 9), (4, 9)),
    "maximum_broadcast_col": _binary(ops.maximum, (6, 5), (6, 1)),
    "minimum_size1": _binary(ops.minimum, (1, 1), (1, 1)),
    # reductions
    "sum_all": _unary(ops.sum, (5, 7)),
    "sum_axis0_keepdims": _unary(ops.sum, (5, 7), axis=0, keepdims=True),
    "mean_last": _unary(ops.mean, (3, 4, 19), axis=-1),
    "mean_axes_keepdims": _unary(ops.mean, (3, 5, 7), axis=(0, 2), keepdims=True),
    "max_axis1": _unary(ops.max, (3, 11, 2), axis=1),
    "min_axis0": _unary(ops.min, (13, 3), axis=0),
    "prod_axis1_keepdims": _unary(ops.prod, (3, 7, 2), axis=1, keepdims=True),
    # data movement
    "transpose_reverse": _unary(ops.transpose, (3, 5, 7)),
    "transpose_perm": _unary(ops.transpose, (2, 3, 5, 7), axes=(0, 2, 3, 1)),
    "reshape": _unary(ops.reshape, (6, 35), newshape=(5, -1, 7)),
    "reshape_flatten": _unary(ops.reshape, (3, 1, 5), newshape=(15,)),
    # matrix products
    "matmul": _matmul(13, 7, 5),
    "matmul_size1": _matmul(1, 1, 1),
    "matmul_wide_prime": _matmul(3, 5, 67),
    "matmul_bias": _matmul(5, 3, 19, bias=True),
    "matmul_transpose_a": _matmul(7, 5, 3, transpose_a=True),
    "matmul_transpose_b": _matmul(3, 11, 17, transpose_b=True),
    "matmul_transpose_both": _matmul(5, 2, 7, transpose_a=True, transpose_b=True),
    "dense": _dense(3, 13, 7, bias=False),
    "dense_bias": _dense(2, 5, 11, bias=True),
    "batch_matmul": _batch_matmul(2, 5, 7, 3),
    "batch_matmul_size1": _batch_matmul(1, 1, 3, 1),
    # convolutions
    "conv1d": _conv1d(1, 11, 3, 5, 3, 1, 1, 1),
    "conv1d_stride_dilation": _conv1d(2, 13, 2, 3, 3, 2, 2, 2),
    "conv2d_nhwc": _conv_nhwc(1, 7, 5, 3, 5, 3, pad=1),
    "conv2d_nhwc_stride2": _conv_nhwc(1, 9, 7, 2, 3, 3, stride=2, pad=1),
    "conv2d_nhwc_dilation2": _conv_nhwc(1, 9, 9, 3, 2, 3, pad=2, dilation=2),
    "conv2d_nhwc_groups": _conv_nhwc(1, 5, 5, 6, 9, 3, pad=1, groups=3),
    "conv2d_nhwc_1x1": _conv_nhwc(2, 3, 3, 5, 7, 1),
    "conv3d": _conv3d((1, 3, 5, 5, 2), 3, 3, 1, 1),
    "conv3d_stride2": _conv3d((1, 5, 5, 7, 2), 2, 3, 2, 0),
    "conv2d_nchw": _conv_nchw(1, 3, 7, 5, 5, 3, 1, 1),
    "conv2d_nchw_stride_dilation": _conv_nchw(1, 2, 11, 9, 3, 3, 2, 2, 2),
    "depthwise": _depthwise(1, 7, 7, 5, 1, 3, 1, 1),
    "depthwise_multiplier_stride": _depthwise(1, 9, 7, 3, 2, 3, 2, 1),
    "depthwise_dilation": _depthwise(1, 9, 9, 2, 1, 3, 1, 2, 2),
    "conv2d_transpose": _transposed(1, 3, 3, 2, 3, 3, 1, 0),
    "conv2d_transpose_stride2": _transposed(1, 3, 4, 3, 5, 4, 2, 1),
    "conv2d_transpose_stride3": _transposed(1, 2, 3, 2, 3, 3, 3, 1),
    "capsule": _capsule(1, 5, 5, 2, 3, 2, 3, 1, 1),
    "capsule_stride2": _capsule(1, 7, 5, 2, 2, 3, 3, 2, 0),
    # pooling
    "max_pool_nhwc": _pool(ops.max_pool2d, (1, 7, 7, 3), 3, 2, 1, "NHWC"),
    "max_pool_nchw": _pool(ops.max_pool2d, (2, 3, 5, 7), (2, 3), (1, 2), (1, 0), "NCHW"),
    "avg_pool_nhwc_padded": _pool(ops.avg_pool2d, (1, 7, 5, 3), 3, 2, 1, "NHWC"),
    "avg_pool_nchw_padded": _pool(ops.avg_pool2d, (1, 2, 9, 7), (3, 2), (2, 1), (1, 1), "NCHW"),
    "avg_pool_unpadded": _pool(ops.avg_pool2d, (1, 5, 5, 2), 2, 2, 0, "NHWC"),
    "global_avg_pool_nhwc": _global_pool((2, 5, 3, 7), "NHWC"),
    "global_avg_pool_nchw": _global_pool((1, 7, 5, 3), "NCHW"),
    # normalisations and softmax
    "layer_norm_last": _layer_norm((3, 17), -1),
    "layer_norm_two_axes": _layer_norm((2, 5, 7), (1, 2)),
    "layer_norm_middle": _layer_norm((3, 5, 2), 1),
    "batch_norm_nchw": _batch_norm((1, 3, 5, 7), 1),
    "batch_norm_nhwc": _batch_norm((2, 3, 5, 7), 3),
    "norm_bmn": _unary(ops.norm_bmn, (2, 5, 7)),
    "softmax_last": _unary(ops.softmax, (3, 19)),
    "softmax_axis0": _unary(ops.softmax, (7, 5), axis=0),
    "softmax_1d": _unary(ops.softmax, (11,)),
    "softmax_size1_axis": _unary(ops.softmax, (5, 1)),
    # subgraphs
    "conv2d_bn_relu": _cbr(1, 7, 7, 3, 5, 3, 2, 1),
    "conv2d_bn_relu_dilation": _cbr(1, 7, 5, 2, 3, 3, 1, 2, 2),
    "transpose_batch_matmul": _tbg(1, 5, 2, 3),
    "transpose_batch_matmul_batch2": _tbg(2, 7, 1, 5),
}


def _typed(op: Callable[..., te.Tensor], specs: list[tuple[tuple[int, ...], str]], **kw: object) -> Callable[[], tuple]:
    """An op over placeholders of the given (shape, dtype)s (ints are drawn from -4..4, bools at random)."""
    def make() -> tuple:
        xs = [te.placeholder(shape, dtype, f"in{i}") for i, (shape, dtype) in enumerate(specs)]
        return xs, op(*xs, **kw)

    return make


F32, I64, BOOL = "float32", "int64", "bool"
OP_CASES.update({
    # the graph level's extra ops (ops/math.py, ops/indexing.py)
    **{name: _unary(getattr(ops, name), (3, 17)) for name in ("abs", "erf", "gelu_tanh", "hard_swish", "neg", "sqrt",
                                                               "log", "reciprocal", "isnan")},
    "hard_sigmoid": _unary(ops.hard_sigmoid, (5, 7), alpha=0.3, beta=0.6),
    "clip": _unary(ops.clip, (5, 7), lo=-0.5, hi=0.25),
    "cast_int": _unary(ops.cast, (4, 9), dtype="int64"),
    "power": _typed(ops.power, [((3, 5), F32), ((5,), F32)]),
    "mod_float": _typed(ops.mod, [((3, 5), F32), ((5,), F32)]),
    "mod_int": _typed(ops.mod, [((3, 5), I64), ((5,), I64)]),  # divisors -4..4: 0 included
    "fmod_float": _typed(ops.fmod, [((3, 5), F32), ((5,), F32)]),
    "fmod_int": _typed(ops.fmod, [((3, 5), I64), ((3, 5), I64)]),
    **{op: _typed(getattr(ops, op), [((3, 5), I64), ((5,), I64)]) for op in ("bitand", "bitor", "bitxor")},
    # shifts by tensors of amounts -4..4: negative ones give 0 or the sign fill
    "shl": _typed(ops.shl, [((3, 5), I64), ((5,), I64)]),
    "shr": _typed(ops.shr, [((3, 5), I64), ((3, 5), I64)]),
    "shl_scalar": _typed(ops.shl, [((2, 7), "int32")], b=3),
    **{name: _typed(getattr(ops, name), [((3, 5), F32), ((3, 1), F32)]) for name in (
        "equal", "less", "greater", "less_equal", "greater_equal")},
    "logical_and": _typed(ops.logical_and, [((3, 5), BOOL), ((5,), BOOL)]),
    "logical_or": _typed(ops.logical_or, [((3, 5), BOOL), ((3, 1), BOOL)]),
    "logical_not": _typed(ops.logical_not, [((3, 5), BOOL)]),
    "where": _typed(ops.where, [((3, 1), BOOL), ((3, 5), F32), ((5,), F32)]),
    "matmul_nd": _typed(ops.matmul_nd, [((2, 1, 5, 3), F32), ((3, 3, 7), F32)]),
    "concat": _typed(lambda a, b: ops.concat([a, b, a], axis=1), [((3, 5), F32), ((3, 2), F32)]),
    "strided_slice": _typed(ops.strided_slice, [((7, 9), F32)], begin=(6, 1), end=(0, 8), strides=(-3, 2)),
    "take": _typed(ops.take, [((7, 3), F32), ((2, 3), I64)], axis=0),
    "gather_elements": _typed(ops.gather_elements, [((4, 6), F32), ((4, 3), I64)], axis=1),
    "broadcast_to": _typed(ops.broadcast_to, [((3, 1), F32)], shape=(2, 3, 5)),
    "pad_constant": _typed(ops.pad_constant, [((4, 6), F32)], before=(1, -1), after=(2, 0), value=-2.0),
    "attention": _typed(ops.attention, [((2, 7, 3), F32), ((2, 3, 5), F32), ((2, 5, 9), F32), ((7, 5), F32)],
                        scale=0.7),
    "winograd_input_f4": _typed(ops.winograd_input_nhwc, [((1, 7, 9, 5), F32)], m=4, pads=(1, 0, 2, 1)),
    "winograd_input_f2": _typed(ops.winograd_input_nhwc, [((2, 5, 6, 3), F32)], m=2, pads=(1, 1, 1, 1)),
    "winograd_output_f4": _typed(ops.winograd_output_nhwc, [((6, 6, 6, 3), F32)], m=4, n=1, out_hw=(8, 9)),
    "winograd_output_f2": _typed(ops.winograd_output_nhwc, [((4, 4, 18, 5), F32)], m=2, n=2, out_hw=(5, 6)),
})


def test_every_op_has_a_case():
    covered = {attr(OP_CASES[case]()[1], "ref_op") for case in OP_CASES}
    missing = set(ops.__all__) - covered
    assert not missing, f"ops without a compiled case: {sorted(missing)}"


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_compiles_and_matches_reference(case):
    inputs, out = OP_CASES[case]()
    check_compiled(tg.Workload(inputs, [out]))


@pytest.mark.parametrize("workload_id", workloads.list())
def test_suite_workload_reduced_matches_reference(workload_id):
    check_compiled(workloads.get(workload_id, reduced=True))


@pytest.mark.parametrize("case", ["matmul", "conv2d_nhwc"])
def test_integer_products_match_the_reference(case):
    """uint8 x int8 summed in int32 (accumulate="int32"); the convolution's border reads pad_value
    (a quantized input's zero point), in the te lowering and in testing's reference alike."""
    if case == "matmul":
        a, b = te.placeholder((5, 37), "uint8", "a"), te.placeholder((37, 19), "int8", "b")
        wl = tg.Workload([a, b], [ops.matmul(a, b, accumulate="int32")])
    else:
        x, w = te.placeholder((1, 7, 5, 6), "uint8", "x"), te.placeholder((3, 3, 6, 9), "int8", "w")
        wl = tg.Workload([x, w], [ops.conv2d_nhwc(x, w, stride=2, padding=1, accumulate="int32", pad_value=7)])
    check_compiled(wl)
