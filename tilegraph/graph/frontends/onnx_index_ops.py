"""ONNX prefix sums and index operators written with graph ops (registered into onnx_ops.CONVERTERS):

    CumSum(x, axis)          reduce_sum over k of where(k <= i, x[.., k], 0)    (a constant triangle)
    CumProd(x, axis)         the same with reduce_prod and 1
    OneHot(i, depth, v)      where(position == i, on, off) along `axis`
    GatherND(d, i)           gather(d viewed (prod(indexed dims), rest), linear index of i)
    ScatterND, ScatterElements
                             per target position, the updates whose index hits it (an equality
                             mask), summed or reduced; where nothing hits, the data as it is
    TensorScatter            a KV-cache write: where(p - start inside the update, update[p - start], past)
    Det(x)                   Leibniz's sum over permutations (orders up to 5)
    MaxUnpool, Col2Im        a scatter into zeros; a matmul with a constant placement matrix
    TopK(x, k)               each element's rank (how many precede it: larger, or equal at a lower
                             index), then output r takes the element whose rank is r

The masks cost (updates x positions) work: these ops sit at the edges of inference graphs (position
ids, embedding updates, cache writes), not in their hot loops.
"""

from __future__ import annotations

import itertools
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


@converts("TensorScatter")
def _tensor_scatter(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """A KV-cache write: cache position p of batch entry b takes update[p - w_b] (mod the cache's
    length in circular mode) where that index is inside the update, else keeps the past value."""
    past, update, name = ins[0], ins[1], node.name or "tensor_scatter"
    shape, u_shape = e.type_of(past).shape, e.type_of(update).shape
    rank = len(shape)
    axis = int(attrs.get("axis", -2))
    if not -rank < axis < rank or axis % rank == 0:
        raise GraphError(f"node {name!r} (TensorScatter): axis {axis} must be a non-batch axis of {e.type_of(past)}")
    axis %= rank
    mode = attrs.get("mode", "linear")
    if (len(u_shape) != rank or any(a != b for d, (a, b) in enumerate(zip(shape, u_shape)) if d != axis)
            or u_shape[axis] > shape[axis] or mode not in ("linear", "circular")):
        raise GraphError(f"node {name!r} (TensorScatter): update {e.type_of(update)} does not fit cache "
                         f"{e.type_of(past)} along axis {axis} (mode {mode!r})")
    length, count = shape[axis], u_shape[axis]
    position = np.arange(length, dtype=np.int64).reshape([length if d == axis else 1 for d in range(rank)])
    offset = e.constant(position, f"{name}_positions")
    if len(ins) > 2 and ins[2]:
        starts = e.emit("reshape", [_int64(e, ins[2], f"{name}_starts64")], {"shape": (shape[0],) + (1,) * (rank - 1)},
                        f"{name}_starts")
        offset = e.emit("sub", [offset, starts], name=f"{name}_offset")
    if mode == "circular":
        offset = e.emit("mod", [offset, e.constant(np.array(length, np.int64), f"{name}_length")], name=f"{name}_wrap")
    inside = e.emit("and", [e.emit("greater_equal", [offset, e.constant(np.array(0, np.int64), f"{name}_zero")],
                                   name=f"{name}_from"),
                            e.emit("less", [offset, e.constant(np.array(count, np.int64), f"{name}_count")],
                                   name=f"{name}_to")], name=f"{name}_inside")
    index = e.emit("min", [e.emit("max", [offset, e.constant(np.array(0, np.int64), f"{name}_lo")], name=f"{name}_floor"),
                e.constant(np.array(count - 1, np.int64), f"{name}_hi")], name=f"{name}_index")
    index = e.emit("expand", [index], {"shape": shape}, f"{name}_index_full")
    picked = e.emit("gather_elements", [update, index], {"axis": axis}, f"{name}_picked")
    return [e.emit("where", [inside, picked, past], name=name, outputs=[_out(node)])]


MAX_DET_ORDER = 5  # Leibniz's sum has order! terms


@converts("Det")
def _det(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Leibniz's formula: the sum over permutations p of sign(p) * prod_i a[i, p(i)], each product
    a gather of constant flat indices (small matrices only: order! terms)."""
    x, name = ins[0], node.name or "det"
    shape = e.type_of(x).shape
    if len(shape) < 2 or shape[-1] != shape[-2] or not 1 <= shape[-1] <= MAX_DET_ORDER:
        raise GraphError(f"node {name!r} (Det): needs [..., M, M] with M <= {MAX_DET_ORDER}, got {e.type_of(x)}")
    order = shape[-1]
    perms = list(itertools.permutations(range(order)))
    signs = np.array([np.linalg.det(np.eye(order)[list(p)]) for p in perms]).round().astype(e.type_of(x).dtype)
    flat_index = np.array([[i * order + p[i] for i in range(order)] for p in perms], dtype=np.int64)
    lead = shape[:-2]
    flat = e.emit("reshape", [x], {"shape": (*lead, order * order)}, f"{name}_flat")
    picked = e.emit("gather", [flat, e.constant(flat_index, f"{name}_perms")], {"axis": len(lead)}, f"{name}_terms")
    products = e.emit("reduce_prod", [picked], {"axes": (-1,), "keepdims": 0}, f"{name}_products")
    signed = e.emit("mul", [products, e.constant(signs, f"{name}_signs")], name=f"{name}_signed")
    return [e.emit("reduce_sum", [signed], {"axes": (-1,), "keepdims": 0}, name, [_out(node)])]


@converts("MaxUnpool")
def _max_unpool(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Zeros of the output shape with X written at its flat indices, which MaxPool computed over an
    input of that shape (as ONNX Runtime and PyTorch's max_unpool read them; ONNX's reference
    scatters into the shape the attributes infer and pads that instead, which places values
    elsewhere whenever output_shape differs from it)."""
    x, indices, name = ins[0], ins[1], node.name or "max_unpool"
    shape = e.type_of(x).shape
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(s) for s in attrs.get("strides", [1] * len(kernel))]
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * len(kernel))]
    inferred = (*shape[:2], *((n - 1) * s - pads[i] - pads[i + len(kernel)] + k
                              for i, (n, s, k) in enumerate(zip(shape[2:], strides, kernel))))
    out_shape = tuple(_ints(e, ins[2], f"node {name!r} (MaxUnpool) output_shape")) if len(ins) > 2 and ins[2] \
        else inferred
    if len(out_shape) != len(shape) or tuple(out_shape[:2]) != tuple(shape[:2]) or min(out_shape) < 1:
        raise GraphError(f"node {name!r} (MaxUnpool): output shape {list(out_shape)} does not fit {e.type_of(x)} "
                         "(same batch and channels, positive extents)")
    total = int(np.prod(out_shape))
    zeros = e.constant(np.zeros((total, 1), dtype=e.type_of(x).dtype), f"{name}_zeros")
    count = e.type_of(x).size
    linear = e.emit("reshape", [_int64(e, indices, f"{name}_i64")], {"shape": (count,)}, f"{name}_linear")
    updates = e.emit("reshape", [x], {"shape": (count, 1)}, f"{name}_updates")
    rows = scatter_rows(e, node, zeros, linear, updates, "none", name)
    y = e.emit("reshape", [rows], {"shape": out_shape}, f"{name}_unpooled")
    return [e.emit("identity", [y], name=name, outputs=[_out(node)])]


MAX_COL2IM_MATRIX = 1 << 24  # Col2Im is a matmul with a constant 0/1 placement matrix


@converts("Col2Im")
def _col2im(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """The columns [N, C * prod(block), L] summed into the image: a matmul of [N, C, prod(block) * L]
    with a constant matrix placing each (block offset, sliding position) at its pixel (padding dropped)."""
    x, name = ins[0], node.name or "col2im"
    image = _ints(e, ins[1], f"node {name!r} (Col2Im) image_shape")
    block = _ints(e, ins[2], f"node {name!r} (Col2Im) block_shape")
    dims = len(image)
    strides = [int(s) for s in attrs.get("strides", [1] * dims)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * dims)]
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * dims)]
    n, rows, length = e.type_of(x).shape
    kernel = int(np.prod(block))
    slides = [(image[i] + pads[i] + pads[i + dims] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(dims)]
    if rows % kernel or int(np.prod(slides)) != length or min(slides) < 1:
        raise GraphError(f"node {name!r} (Col2Im): input {e.type_of(x)} does not fit image {image}, block {block}")
    pixels = int(np.prod(image))
    if kernel * length * pixels > MAX_COL2IM_MATRIX:
        raise GraphError(f"node {name!r} (Col2Im): a {kernel * length} x {pixels} placement matrix is too large")
    channels = rows // kernel
    placement = np.zeros((kernel * length, pixels), dtype=e.type_of(x).dtype)
    for b, offset in enumerate(itertools.product(*[range(k) for k in block])):
        for s, start in enumerate(itertools.product(*[range(k) for k in slides])):
            at = [start[i] * strides[i] + offset[i] * dilations[i] - pads[i] for i in range(dims)]
            if all(0 <= a < image[i] for i, a in enumerate(at)):
                placement[b * length + s, int(np.ravel_multi_index(at, image))] += 1
    columns = e.emit("reshape", [x], {"shape": (n, channels, kernel * length)}, f"{name}_columns")
    y = e.emit("matmul", [columns, e.constant(placement, f"{name}_placement")], name=f"{name}_placed")
    return [e.emit("reshape", [y], {"shape": (n, channels, *image)}, name, [_out(node)])]
