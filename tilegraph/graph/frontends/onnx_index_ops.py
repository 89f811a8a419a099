"""ONNX prefix sums and index operators written with graph ops (registered into onnx_ops.CONVERTERS):

    CumSum(x, axis)          reduce_sum over k of where(k <= i, x[.., k], 0)    (a constant triangle)
    CumProd(x, axis)         the same with reduce_prod and 1
    OneHot(i, depth, v)      where(position == i, on, off) along `axis`
    GatherND(d, i)           gather(d viewed (prod(indexed dims), rest), linear index of i)
    ScatterND, ScatterElements
                             per target position, the updates whose index hits it (an equality
                             mask), summed or reduced; where nothing hits, the data as it is
    TopK(x, k)               each element's rank (how many precede it: larger, or equal at a lower
                             index), then output r takes the element whose rank is r

The masks cost (updates x positions) work: these ops sit at the edges of inference graphs (position
ids, embedding updates, cache writes), not in their hot loops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _ints, _out, _rank, converts
from tilegraph.graph.ir import is_float


def _int64(e: Emitter, x: str, name: str) -> str:
    return x if e.type_of(x).dtype == "int64" else e.emit("cast", [x], {"to": "int64"}, name)


def _wrapped(e: Emitter, index: str, extent: str | int, name: str) -> str:
    """Negative indices counted from the end: where(i < 0, i + extent, i)."""
    size = e.constant(np.asarray(extent, np.int64), f"{name}_extent") if isinstance(extent, (int, np.ndarray)) else extent
    negative = e.emit("less", [index, e.constant(np.array(0, np.int64), f"{name}_zero")], name=f"{name}_negative")
    return e.emit("where", [negative, e.emit("add", [index, size], name=f"{name}_shifted"), index], name=f"{name}_wrapped")


@converts("CumSum", "CumProd")
def _cumsum(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    axis = _ints(e, ins[1], f"node {name!r} ({node.op_type}) axis")[0]
    product = node.op_type == "CumProd"
    if not -len(shape) <= axis < len(shape):
        raise GraphError(f"node {name!r} ({node.op_type}): axis {axis} is out of range for {e.type_of(x)}")
    axis %= len(shape)
    n = shape[axis]
    i, k = np.arange(n)[:, None], np.arange(n)[None, :]
    reverse, exclusive = bool(attrs.get("reverse", 0)), bool(attrs.get("exclusive", 0))
    take = (k >= i) if reverse else (k <= i)
    if exclusive:
        take &= k != i
    # x viewed with the summed axis last, one row per output position: (..., n_out=1, n_k) against (n, n)
    moved = [d for d in range(len(shape)) if d != axis] + [axis]
    y = e.emit("transpose", [x], {"perm": tuple(moved)}, f"{name}_last") if moved != list(range(len(shape))) else x
    rows = e.emit("reshape", [y], {"shape": (*e.type_of(y).shape[:-1], 1, n)}, f"{name}_rows")
    neutral = e.constant(np.array(1 if product else 0, e.type_of(x).dtype), f"{name}_neutral")
    masked = e.emit("where", [e.constant(take, f"{name}_triangle"), rows, neutral], name=f"{name}_masked")
    sums = e.emit("reduce_prod" if product else "reduce_sum", [masked], {"axes": (-1,), "keepdims": 0}, f"{name}_sums")
    if moved != list(range(len(shape))):
        sums = e.emit("transpose", [sums], {"perm": tuple(int(p) for p in np.argsort(moved))}, f"{name}_back")
    return [e.emit("identity", [sums], name=f"{name}_out", outputs=[_out(node)])]


@converts("OneHot")
def _one_hot(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    indices, name = ins[0], node.name
    depth = int(np.asarray(e.value(ins[1], f"node {name!r} (OneHot) depth")).reshape(-1)[0])
    rank = _rank(e, indices) + 1
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank:
        raise GraphError(f"node {name!r} (OneHot): axis {axis} is out of range for rank {rank}")
    axis %= rank
    index = _int64(e, indices, f"{name}_i64")  # float indices truncate, as ONNX's OneHot casts them
    index = _wrapped(e, index, depth, name)
    view = list(e.type_of(index).shape)
    view.insert(axis, 1)
    index = e.emit("reshape", [index], {"shape": tuple(view)}, f"{name}_view")
    positions = [1] * rank
    positions[axis] = depth
    hit = e.emit("equal", [index, e.constant(np.arange(depth, dtype=np.int64).reshape(positions), f"{name}_depth")],
                 name=f"{name}_hit")
    values = ins[2]
    off = e.emit("reshape", [e.emit("slice", [values], {"begin": (0,), "end": (1,), "steps": (1,)}, f"{name}_off1")],
                 {"shape": ()}, f"{name}_off")
    on = e.emit("reshape", [e.emit("slice", [values], {"begin": (1,), "end": (2,), "steps": (1,)}, f"{name}_on1")],
                {"shape": ()}, f"{name}_on")
    return [e.emit("where", [hit, on, off], name=name, outputs=[_out(node)])]


def _linear_index(e: Emitter, indices: str, dims: tuple[int, ...], batch: int, name: str) -> str:
    """The row-major position, within `dims`, of each index tuple (last axis of `indices`), plus
    its batch's offset (the first `batch` axes of indices, each batch holding prod(dims) rows)."""
    index = _int64(e, indices, f"{name}_i64")
    shape = e.type_of(index).shape
    k = shape[-1]
    index = _wrapped(e, index, np.array(dims[:k], np.int64), name)
    strides = np.array([int(np.prod(dims[j + 1:k], dtype=np.int64)) for j in range(k)], np.int64)
    linear = e.emit("reduce_sum", [e.emit("mul", [index, e.constant(strides, f"{name}_strides")], name=f"{name}_scaled")],
                    {"axes": (-1,), "keepdims": 0}, f"{name}_linear")
    if batch:
        batch_shape = shape[:batch]
        offsets = np.arange(int(np.prod(batch_shape)), dtype=np.int64).reshape(batch_shape) * int(np.prod(dims[:k]))
        offsets = offsets.reshape(batch_shape + (1,) * (len(shape) - 1 - batch))
        linear = e.emit("add", [linear, e.constant(offsets, f"{name}_batch_offsets")], name=f"{name}_batched")
    return linear


@converts("GatherND")
def _gather_nd(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    data, indices, name = ins[0], ins[1], node.name
    d_shape, i_shape = e.type_of(data).shape, e.type_of(indices).shape
    batch = int(attrs.get("batch_dims", 0))
    k = i_shape[-1]
    if batch + k > len(d_shape) or d_shape[:batch] != i_shape[:batch]:
        raise GraphError(f"node {name!r} (GatherND): indices {e.type_of(indices)} do not fit data {e.type_of(data)} "
                         f"with batch_dims={batch}")
    rest = d_shape[batch + k:]
    rows = int(np.prod(d_shape[:batch + k], dtype=np.int64))
    flat = e.emit("reshape", [data], {"shape": (rows, *rest)}, f"{name}_rows")
    linear = _linear_index(e, indices, d_shape[batch:], batch, name)
    return [e.emit("gather", [flat, linear], {"axis": 0}, name, [_out(node)])]


def _any(e: Emitter, mask: str, axis: int, name: str) -> str:
    """Whether any of `mask` along `axis` is true (that axis removed)."""
    wide = e.emit("cast", [mask], {"to": "uint8"}, f"{name}_u8")
    return e.emit("cast", [e.emit("reduce_max", [wide], {"axes": (axis,), "keepdims": 0}, f"{name}_max")],
                  {"to": "bool"}, name)


def _extreme(dtype: str, largest: bool) -> np.ndarray:
    if is_float(dtype):
        return np.array(np.inf if largest else -np.inf, dtype)
    info = np.iinfo(dtype)
    return np.array(info.max if largest else info.min, dtype)


def scatter_rows(e: Emitter, node: Any, data_rows: str, linear: str, updates_rows: str, reduction: str,
                 name: str) -> str:
    """data_rows (N, rest...) with updates_rows (U, rest...) written at rows linear (U,): replaced
    (reduction none), added, multiplied, or combined by max/min; rows no update hits stay as they are."""
    n, rest = e.type_of(data_rows).shape[0], e.type_of(data_rows).shape[1:]
    u = e.type_of(linear).shape[0]
    dtype = e.type_of(data_rows).dtype
    hit = e.emit("equal", [e.emit("reshape", [linear], {"shape": (u, 1)}, f"{name}_lin_col"),
                           e.constant(np.arange(n, dtype=np.int64).reshape(1, n), f"{name}_rows")], name=f"{name}_hit")
    hit_view = e.emit("reshape", [hit], {"shape": (u, n) + (1,) * len(rest)}, f"{name}_hit_view")
    updates_view = e.emit("reshape", [updates_rows], {"shape": (u, 1, *rest)}, f"{name}_updates_view")
    touched = e.emit("reshape", [_any(e, hit, 0, f"{name}_touched")], {"shape": (n,) + (1,) * len(rest)},
                     f"{name}_touched_view")
    if reduction in ("none", "add"):
        zero = e.constant(np.zeros((), dtype), f"{name}_zero")
        summed = e.emit("reduce_sum", [e.emit("where", [hit_view, updates_view, zero], name=f"{name}_picked")],
                        {"axes": (0,), "keepdims": 0}, f"{name}_summed")
        if reduction == "add":
            return e.emit("add", [data_rows, summed], name=f"{name}_added")
        return e.emit("where", [touched, summed, data_rows], name=f"{name}_replaced")
    if reduction == "mul":  # the product of the updates that hit a row (1 where none does), times the row
        one = e.constant(np.ones((), dtype), f"{name}_one")
        product = e.emit("reduce_prod", [e.emit("where", [hit_view, updates_view, one], name=f"{name}_factors")],
                         {"axes": (0,), "keepdims": 0}, f"{name}_product")
        return e.emit("mul", [data_rows, product], name=f"{name}_multiplied")
    if reduction not in ("max", "min"):
        raise GraphError(f"node {node.name!r} ({node.op_type}): reduction {reduction!r} is not supported "
                         "(none, add, mul, max, min)")
    largest = reduction == "max"
    fill = e.constant(_extreme(dtype, not largest), f"{name}_fill")
    best = e.emit("reduce_max" if largest else "reduce_min",
                  [e.emit("where", [hit_view, updates_view, fill], name=f"{name}_candidates")],
                  {"axes": (0,), "keepdims": 0}, f"{name}_best")
    combined = e.emit("max" if largest else "min", [data_rows, best], name=f"{name}_combined")
    return e.emit("where", [touched, combined, data_rows], name=f"{name}_reduced")


@converts("ScatterND")
def _scatter_nd(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    data, indices, updates, name = ins[0], ins[1], ins[2], node.name
    d_shape, i_shape = e.type_of(data).shape, e.type_of(indices).shape
    k = i_shape[-1]
    rest = d_shape[k:]
    if e.type_of(updates).shape != i_shape[:-1] + rest:
        raise GraphError(f"node {name!r} (ScatterND): updates {e.type_of(updates)} do not fit indices "
                         f"{e.type_of(indices)} into data {e.type_of(data)}")
    count = int(np.prod(i_shape[:-1], dtype=np.int64))
    rows = e.emit("reshape", [data], {"shape": (int(np.prod(d_shape[:k], dtype=np.int64)), *rest)}, f"{name}_rows")
    linear = e.emit("reshape", [_linear_index(e, indices, d_shape, 0, name)], {"shape": (count,)}, f"{name}_flat")
    updates_rows = e.emit("reshape", [updates], {"shape": (count, *rest)}, f"{name}_updates")
    y = scatter_rows(e, node, rows, linear, updates_rows, attrs.get("reduction", "none"), name)
    return [e.emit("reshape", [y], {"shape": d_shape}, name, [_out(node)])]


@converts("ScatterElements")
def _scatter_elements(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    data, indices, updates, name = ins[0], ins[1], ins[2], node.name
    d_shape, i_shape = e.type_of(data).shape, e.type_of(indices).shape
    axis = int(attrs.get("axis", 0)) % len(d_shape)
    if e.type_of(updates).shape != i_shape or len(i_shape) != len(d_shape):
        raise GraphError(f"node {name!r} (ScatterElements): indices {e.type_of(indices)} and updates "
                         f"{e.type_of(updates)} must have one shape, of data's rank {e.type_of(data)}")
    strides = [int(np.prod(d_shape[d + 1:], dtype=np.int64)) for d in range(len(d_shape))]
    grid = np.indices(i_shape, dtype=np.int64)
    base = sum(grid[d] * strides[d] for d in range(len(d_shape)) if d != axis)
    index = _wrapped(e, _int64(e, indices, f"{name}_i64"), d_shape[axis], name)
    along = e.emit("mul", [index, e.constant(np.array(strides[axis], np.int64), f"{name}_stride")], name=f"{name}_along")
    linear = e.emit("add", [along, e.constant(np.asarray(base, np.int64), f"{name}_base")], name=f"{name}_linear")
    count = int(np.prod(i_shape, dtype=np.int64))
    flat = e.emit("reshape", [linear], {"shape": (count,)}, f"{name}_flat")
    rows = e.emit("reshape", [data], {"shape": (int(np.prod(d_shape, dtype=np.int64)),)}, f"{name}_rows")
    updates_rows = e.emit("reshape", [updates], {"shape": (count,)}, f"{name}_updates")
    y = scatter_rows(e, node, rows, flat, updates_rows, attrs.get("reduction", "none"), name)
    return [e.emit("reshape", [y], {"shape": d_shape}, name, [_out(node)])]


MAX_TOPK_AXIS = 4096  # the rank compares every pair along the axis


@converts("TopK")
def _top_k(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    rank_ = len(shape)
    k = _ints(e, ins[1], f"node {name!r} (TopK) k")[0] if len(ins) > 1 and ins[1] else int(attrs.get("k", 1))
    axis = int(attrs.get("axis", -1))
    if not -rank_ <= axis < rank_:
        raise GraphError(f"node {name!r} (TopK): axis {axis} is out of range for {e.type_of(x)}")
    axis %= rank_
    n = shape[axis]
    if not 1 <= k <= n:
        raise GraphError(f"node {name!r} (TopK): k {k} is outside 1..{n}")
    if n > MAX_TOPK_AXIS:
        raise GraphError(f"node {name!r} (TopK): an axis of {n} > {MAX_TOPK_AXIS} elements is not supported "
                         "(the ranking compares every pair)")
    perm = [d for d in range(rank_) if d != axis] + [axis]
    moved = e.emit("transpose", [x], {"perm": tuple(perm)}, f"{name}_last") if perm != list(range(rank_)) else x
    lead = e.type_of(moved).shape[:-1]
    column = e.emit("reshape", [moved], {"shape": (*lead, n, 1)}, f"{name}_i")  # element i
    row = e.emit("reshape", [moved], {"shape": (*lead, 1, n)}, f"{name}_j")     # against every j
    before = e.emit("greater" if attrs.get("largest", 1) else "less", [row, column], name=f"{name}_beats")
    earlier = e.constant(np.tril(np.ones((n, n), dtype=bool), -1), f"{name}_earlier")  # j < i
    tie = e.emit("and", [e.emit("equal", [row, column], name=f"{name}_ties"), earlier], name=f"{name}_tie_first")
    ahead = e.emit("or", [before, tie], name=f"{name}_ahead")
    position = e.emit("reduce_sum", [e.emit("cast", [ahead], {"to": "int64"}, f"{name}_count")],
                      {"axes": (-1,), "keepdims": 0}, f"{name}_rank")
    wanted = e.constant(np.arange(k, dtype=np.int64).reshape(k, 1), f"{name}_ranks")
    hit = e.emit("equal", [e.emit("reshape", [position], {"shape": (*lead, 1, n)}, f"{name}_rank_row"), wanted],
                 name=f"{name}_hit")
    zero = e.constant(np.zeros((), dtype=e.type_of(x).dtype), f"{name}_zero")
    values = e.emit("reduce_sum", [e.emit("where", [hit, row, zero], name=f"{name}_pick")],
                    {"axes": (-1,), "keepdims": 0}, f"{name}_values")
    iota = e.constant(np.arange(n, dtype=np.int64), f"{name}_iota")
    indices = e.emit("reduce_sum", [e.emit("where", [hit, iota, e.constant(np.zeros((), np.int64), f"{name}_0")],
                                           name=f"{name}_pick_index")], {"axes": (-1,), "keepdims": 0},
                     f"{name}_indices")
    back = tuple(int(p) for p in np.argsort(perm))
    outs = []
    for i, y in enumerate((values, indices)):
        y = e.emit("transpose", [y], {"perm": back}, f"{name}_back{i}") if perm != list(range(rank_)) else y
        outs.append(e.emit("identity", [y], name=f"{name}_out{i}", outputs=[_out(node, i)]))
    return outs
