"""What every operator shares: argument checks, padding, and the record that names the op.

Each public op is decorated with `@operator("conv2d_nhwc")`. When the op returns, its output tensor
is re-tagged with the op name and gets three attrs that let `tilegraph.testing.reference_outputs`
recompute it from numpy float64 references, without keeping Python objects alive:

    ref_op      the op name (the key of tilegraph.testing.reference.REFERENCES)
    ref_params  ((argument name, value), ...) for every non-tensor argument
    ref_args    ((argument name, position), ...): which boundary tensor feeds each tensor argument
                (a tuple of positions for a list of tensors, as concat's xs)

Intermediate stages (padding, softmax's max, ...) carry ("stage_of", op name) instead. The
"boundary" of an op output is found by walking its producers through stage tensors, stopping at
placeholders and at other ops' outputs; positions index that boundary in first-use order. Every
recorded value is a plain int/float/str/tuple, so workloads stay picklable and the workload key
stays independent of the names users choose.

Ops called inside another op (conv2d_nhwc inside conv2d_bn_relu) build stages of the outer op.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.dtype import as_dtype
from tilegraph.te.expr import Expr, ExprLike, IterVar
from tilegraph.te.printer import expr_str
from tilegraph.te.tensor import ComputeOp, Tensor

# The outermost op being built (its stages are marked with it) and the innermost (it tags them).
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilegraph_op_owner", default=None)
_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilegraph_op_current", default=None)

F = TypeVar("F", bound=Callable[..., Any])


def operator(op_name: str) -> Callable[[F], F]:
    """Mark `fn` as the public op `op_name`: tag its output and record how to recompute it."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Tensor:
            _refuse_run_time_dims(op_name, (*args, *kwargs.values()))
            nested = _OWNER.get() is not None
            owner_token = None if nested else _OWNER.set(op_name)
            current_token = _CURRENT.set(op_name)
            try:
                out = fn(*args, **kwargs)
            finally:
                _CURRENT.reset(current_token)
                if owner_token is not None:
                    _OWNER.reset(owner_token)
            if nested:
                return out
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return _record(out, op_name, bound.arguments)

        op.op_name = op_name  # type: ignore[attr-defined]
        return op  # type: ignore[return-value]

    return wrap


# The ops that compute over their arguments' run-time extents (te/dims.py, Tensor.extents).
DIMS_OPS = frozenset({"relu", "gelu", "sigmoid", "tanh", "exp", "add", "sub", "mul", "div", "maximum", "minimum",
                      "matmul", "dense", "batch_matmul", "matmul_nd", "softmax", "layer_norm", "transpose", "reshape",
                      "sum", "max", "min", "prod", "mean", "concat", "take", "sqrt", "erf", "log", "neg", "abs",
                      "reciprocal", "gelu_tanh", "hard_sigmoid", "hard_swish", "broadcast_to", "clip", "isnan",
                      "logical_not", "cast", "power", "equal", "less", "greater", "less_equal", "greater_equal",
                      "logical_and", "logical_or", "where", "strided_slice"})


# The ops whose first argument may have a run-time extent on one axis only, its batch (here, per
# op): every output element reads one batch entry, and the op keeps that extent (leading_extent).
BATCH_DIMS_OPS = {**dict.fromkeys(("conv1d_nlc", "conv2d_nhwc", "conv3d_ndhwc", "conv2d_nchw", "depthwise_conv2d_nhwc",
                                   "max_pool2d", "avg_pool2d", "global_avg_pool2d", "pad_constant", "batch_norm",
                                   "winograd_input_nhwc"), 0),
                  "winograd_output_nhwc": 2}  # its tiles: batch * tiles per image


def _refuse_run_time_dims(op_name: str, arguments: tuple[Any, ...]) -> None:
    """The other ops compute over their arguments' storage shapes: given a tensor with run-time
    dims they would sum, normalise or index over elements past the run-time extents, a wrong
    answer, so they refuse it until each learns its dims (te.compute takes them directly)."""
    if op_name in DIMS_OPS:
        return
    for k, a in enumerate(arguments):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if k == 0 and op_name in BATCH_DIMS_OPS and isinstance(t, Tensor) and all(
                    b is None for axis, b in enumerate(t.bounds) if axis != BATCH_DIMS_OPS[op_name]):
                continue  # its batch: the op keeps that extent
            if isinstance(t, Tensor) and t.bounds:
                raise ValueError(f"op {op_name} does not take run-time dims yet: argument {t.name} has extents "
                                 f"{[str(b) if b is not None else s for b, s in zip(t.bounds, t.shape)]}; "
                                 "write it with te.compute, whose extents may be dims")


def _record(out: Tensor, op_name: str, arguments: dict[str, Any]) -> Tensor:
    assert isinstance(out.op, ComputeOp), f"{op_name} must return a computed tensor"
    boundary = op_boundary(out)
    tensor_args: list[tuple[str, int]] = []
    params: list[tuple[str, object]] = []
    for arg_name, value in arguments.items():
        if arg_name == "name":
            continue
        if isinstance(value, Tensor):
            tensor_args.append((arg_name, _boundary_position(op_name, arg_name, value, boundary)))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Tensor) for v in value):
            # a list of tensors (concat's xs) records a tuple of positions
            tensor_args.append((arg_name, tuple(_boundary_position(op_name, arg_name, v, boundary) for v in value)))
        else:
            params.append((arg_name, plain(value)))
    attrs = {k: v for k, v in out.op.attrs if k != "stage_of"}
    attrs.update(ref_op=op_name, ref_params=tuple(params), ref_args=tuple(tensor_args))
    new_op = replace(out.op, tag=op_name, attrs=tuple(sorted(attrs.items())))
    return replace(out, op=new_op)


def _boundary_position(op_name: str, arg_name: str, value: Tensor, boundary: list[Tensor]) -> int:
    position = next((i for i, t in enumerate(boundary) if t is value), None)
    if position is None:
        raise ValueError(f"{op_name}: argument {arg_name} ({value.name}) is an internal stage of another op; "
                         "pass placeholders or op outputs")
    return position


def plain(value: Any) -> object:
    """A hashable, picklable copy of a parameter (lists become tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    return value


def attr(t: Tensor, key: str, default: object = None) -> object:
    """The value of compute attribute `key` of `t` (default for placeholders or when absent)."""
    if not isinstance(t.op, ComputeOp):
        return default
    return dict(t.op.attrs).get(key, default)


def op_boundary(out: Tensor) -> list[Tensor]:
    """The tensors an op output is computed from: its producers, seen through its own stages."""
    found: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor) -> None:
        for producer in t.inputs:
            if id(producer) in seen:
                continue
            seen.add(id(producer))
            if attr(producer, "stage_of") is not None and attr(producer, "ref_op") is None:
                visit(producer)
            else:
                found.append(producer)

    visit(out)
    return found


def stage(shape: Sequence[int | Expr], fcompute: Callable[..., ExprLike], name: str, tag: str = "",
          axis_names: Sequence[str] | None = None) -> Tensor:
    """te.compute for a stage of the op being built (the decorator re-tags the final one).

    axis_names names the axes when fcompute takes *indices (te.compute reads its signature).
    """
    if axis_names is not None:
        fcompute = _with_parameter_names(fcompute, axis_names)
    owner = _OWNER.get()
    attrs = {"stage_of": owner} if owner is not None else None
    return te.compute(shape, fcompute, name=name, tag=tag or (_CURRENT.get() or ""), attrs=attrs)


def _with_parameter_names(fn: Callable[..., ExprLike], names: Sequence[str]) -> Callable[..., ExprLike]:
    def named(*idx: Expr) -> ExprLike:
        return fn(*idx)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    named.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])  # type: ignore[attr-defined]
    return named


# ---------------------------------------------------------------------------------------------
# Argument checks


def check_tensor(x: object, arg: str, ndim: int | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"argument {arg} must be a te.Tensor, got {type(x).__name__}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"argument {arg} must have {ndim} dimensions, got shape {x.shape}")
    return x


def same_extent(a: int | Expr, b: int | Expr) -> bool:
    """Whether two extents (Tensor.extents) are the same: equal integers, or the same run-time
    expression (a run-time dim equals no integer, whatever its range)."""
    return type(a) is type(b) and a == b


def check_float(x: Tensor, arg: str) -> None:
    if not x.dtype.is_float:
        raise TypeError(f"argument {arg} must have a floating-point dtype, got {x.dtype}")


def same_dtype(arg_tensors: dict[str, Tensor]) -> None:
    dtypes = {name: t.dtype for name, t in arg_tensors.items()}
    if len(set(dtypes.values())) > 1:
        raise TypeError(f"arguments must share one dtype, got {dtypes}")


def widening(accumulate: str | None, arg_tensors: dict[str, Tensor]) -> Callable[[Expr], Expr]:
    """How a product's operands enter its sum: as they are (None), or widened to `accumulate`:
    "float32" sums bfloat16 (or float32) operands in float32 (each element converts exactly, the sum
    rounds in float32); "int32" sums the products of uint8/int8 operands exactly in int32 (wrapping
    past 2**31, as the hardware's dot products do)."""
    if accumulate is None:
        same_dtype(arg_tensors)
        return lambda e: e
    acc = as_dtype(accumulate)
    takes = {dt.float32: ("float32", "bfloat16"), dt.int32: ("uint8", "int8")}.get(acc, ())
    wrong = {name: t.dtype.name for name, t in arg_tensors.items() if t.dtype.name not in takes}
    if not takes or wrong:
        raise TypeError(f"argument accumulate={accumulate!r}: products accumulate in float32 from float32 or bfloat16 "
                        f"operands, or in int32 from uint8 or int8 operands, got {wrong or acc}")
    if acc == dt.float32:
        same_dtype(arg_tensors)
    return lambda e: e if e.dtype == acc else te.cast(acc, e)


def as_tuple(value: int | Sequence[int], n: int, arg: str, minimum: int = 0) -> tuple[int, ...]:
    """An int or a length-n sequence of ints, each >= minimum, as an n-tuple."""
    if isinstance(value, bool):
        raise TypeError(f"argument {arg} must be an int or {n} ints, got {value!r}")
    items = (value,) * n if isinstance(value, int) else tuple(value)
    if len(items) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError(f"argument {arg} must be an int or {n} ints, got {value!r}")
    if any(v < minimum for v in items):
        raise ValueError(f"argument {arg} must be >= {minimum}, got {value!r}")
    return items


def normalize_axis(axis: int, ndim: int, arg: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"argument {arg} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"argument {arg}={axis} is out of range for a tensor with {ndim} dimensions")
    return axis % ndim


def normalize_axes(axis: int | Sequence[int] | None, ndim: int, arg: str = "axis") -> tuple[int, ...]:
    """Sorted, distinct, non-negative axes; None means all axes."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(sorted(normalize_axis(a, ndim, arg) for a in items))
    if len(set(out)) != len(out):
        raise ValueError(f"argument {arg} repeats an axis: {axis!r}")
    if not out:
        raise ValueError(f"argument {arg} names no axis")
    return out


def conv_out_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int,
                  what: str) -> int:
    span = dilation * (kernel - 1) + 1
    out = (size + pad_before + pad_after - span) // stride + 1
    if out < 1:
        raise ValueError(f"{what}: the (dilated) kernel of extent {span} does not fit the padded input "
                         f"of extent {size + pad_before + pad_after}")
    return out


# ---------------------------------------------------------------------------------------------
# Padding


def tap(out_index: Expr, stride: int, reduce: Expr | IterVar, dilation: int = 1) -> Expr:
    """out_index * stride + reduce * dilation, without multiplications by 1."""
    scaled = out_index * stride if stride != 1 else out_index
    offset = reduce * dilation if dilation != 1 else reduce
    return scaled + offset


def clamp(index: Expr, extent: int) -> Expr:
    """index limited to [0, extent), so a guarded read never leaves the tensor."""
    return te.min_(te.max_(index, 0), extent - 1)


def leading_extent(x: Tensor) -> int | Expr:
    """x's leading (batch) extent: its run-time extent where it has one (ops in BATCH_DIMS_OPS)."""
    return x.extents[0]


def pad(x: Tensor, before: Sequence[int], after: Sequence[int], value: float, name: str) -> Tensor:
    """x surrounded by `value`: a stage whose out-of-range points read a clamped index and discard it.
    An axis with a run-time extent is not padded (its extent kept).

    Returns x itself when nothing is padded, so unpadded ops have no extra stage.
    """
    if not any(before) and not any(after):
        return x
    if any((b or a) and e is not None for e, b, a in zip(x.bounds, before, after)):
        raise ValueError(f"{name}: an axis of run-time extent cannot be padded (x extents "
                         f"{[str(e) if isinstance(e, int) else expr_str(e) for e in x.extents]}, "
                         f"before {tuple(before)}, after {tuple(after)}); pad only its static axes")
    shape = tuple(e if not b and not a else s + b + a for s, e, b, a in zip(x.shape, x.extents, before, after))
    fill = te.const(value, x.dtype)

    def body(*idx: Expr) -> Expr:
        conds = []
        reads = []
        for i, extent, b, a in zip(idx, x.shape, before, after):
            if b == 0 and a == 0:
                reads.append(i)
                continue
            if b:
                conds.append(i.ge(b))
            if a:
                conds.append(i.lt(extent + b))
            shifted = i - b if b else i
            reads.append(clamp(shifted, extent) if a and b else te.max_(shifted, 0) if b else te.min_(shifted, extent - 1))
        return te.select(te.all_of(*conds), x[tuple(reads)], fill)

    return stage(shape, body, name=name, tag="pad")
