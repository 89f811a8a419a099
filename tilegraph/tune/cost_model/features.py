"""Per-store features of a scheduled program (Ansor's / MetaSchedule's PerStoreFeature, on our loop IR).

    feats = store_features(sch.func)     # one row per BufferStore, FEATURE_NAMES columns, log2(1 + x) scaled
    program_features(sch.func)           # the same rows as a float32 matrix
    PER_STORE_FEATURES                   # the FeatureSet a cost model names (cost_model/base.py)

Every block's store is described in the context of the loops around it (the scheduled loop IR:
loops with their kinds, blocks with their bindings; lowering only spells out what these already
decide, and costs ~100 ms a program where this costs ~1 ms). Groups:

- computation: float add/sub, mul, fused multiply-add, div, max/min, math calls, compares/selects,
  casts, each counted over every execution of the store;
- loop annotations, for vectorized / unrolled / parallel loops: how many, the product of their
  extents, the innermost one's extent, and whether it is the innermost loop of the nest;
- per-buffer access (the 5 buffers with the most bytes, zero-padded): read / write / read-write,
  bytes accessed, unique bytes, cache lines, unique cache lines, stride of the innermost loop,
  whether some loop re-reads it (a loop whose variable its index does not use), that reuse's
  distance in iterations and in bytes, its count, and bytes per reuse;
- arithmetic intensity (FLOPs / unique bytes) of the loop levels, sampled at 10 points from the
  outermost level to the innermost;
- allocation: the stored buffer's size when it is local (accumulators), and outer scope: the
  number of loops, the product of their extents, the number of loops around it that run once.

Hand-computed cases are in tests/tune/cost_model/test_features.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tilegraph.loop.ir import Block, BufferStore, For, Func, Stmt
from tilegraph.loop.visit import stmt_children
from tilegraph.te.arith import affine
from tilegraph.te.expr import BinOp, BufferLoad, Call, Cast, Cmp, Expr, Select, Var
from tilegraph.te.visit import free_vars, substitute, walk
from tilegraph.tune.cost_model.base import FeatureSet

CACHE_LINE = 64
MAX_BUFFERS = 5
CURVE_POINTS = 10
ANNOTATIONS = ("vectorized", "unrolled", "parallel")
_COMPUTE = ("add_sub", "mul", "fma", "div", "max_min", "math_call", "compare_select", "cast")
_BUFFER = ("is_read", "is_write", "is_read_write", "bytes", "unique_bytes", "lines", "unique_lines", "stride",
           "has_reuse", "reuse_iters", "reuse_bytes", "reuse_count", "bytes_per_reuse", "unique_bytes_per_reuse")
FEATURE_NAMES: tuple[str, ...] = (
    *(f"ops.{c}" for c in _COMPUTE),
    *(f"{a}.{f}" for a in ANNOTATIONS for f in ("count", "product", "inner_extent", "is_innermost")),
    *(f"buf{b}.{f}" for b in range(MAX_BUFFERS) for f in _BUFFER),
    *(f"intensity.{i}" for i in range(CURVE_POINTS)),
    "alloc.local_size", "alloc.is_local", "outer.loops", "outer.iterations", "outer.unit_loops",
)
NUM_FEATURES = len(FEATURE_NAMES)


@dataclass(frozen=True)
class _Access:
    buffer: str
    shape: tuple[int, ...]
    elem_bytes: int
    coeffs: tuple[dict[str, int], ...]  # per dimension: loop variable -> coefficient (|c|; 1 for non-affine uses)
    write: bool


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


StoreRow = Callable[[BufferStore, list[For], dict[str, Expr]], list[float]]


def store_rows(func: Func, row: StoreRow) -> list[list[float]]:
    """`row(store, enclosing loops, block bindings in scope)` for every BufferStore of `func` (a
    reduction's init excluded), in program order: the one walk every per-store feature set takes."""
    rows: list[list[float]] = []
    _visit(func.body, [], {}, rows, row)
    return rows


def store_features(func: Func) -> list[list[float]]:
    """One feature row per BufferStore of `func`, in program order."""
    return store_rows(func, store_row)


def program_features(func: Func) -> np.ndarray:
    rows = store_features(func)
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), NUM_FEATURES)


# The feature set of the CPU search (the version changes whenever a column's meaning does).
PER_STORE_FEATURES = FeatureSet("per-store", f"per-store-v1-{NUM_FEATURES}", NUM_FEATURES, program_features)


def _visit(s: Stmt, loops: list[For], binding: dict[str, Expr], rows: list[list[float]], row: StoreRow) -> None:
    if isinstance(s, For):
        _visit(s.body, [*loops, s], binding, rows, row)
        return
    if isinstance(s, Block):
        inner = dict(binding)
        inner.update({iv.var.name: b for iv, b in zip(s.iter_vars, s.bindings)})
        _visit(s.body, loops, inner, rows, row)
        return
    if isinstance(s, BufferStore):
        rows.append(row(s, loops, binding))
        return
    for child in stmt_children(s):
        _visit(child, loops, binding, rows, row)


def bound(e: Expr, binding: dict[str, Expr]) -> Expr:
    """`e` with block iteration variables replaced by their bindings (loop variables only remain)."""
    mapping = {v: binding[v.name] for v in free_vars(e) if v.name in binding}
    return substitute(e, mapping) if mapping else e


def _index_coeffs(ix: Expr, binding: dict[str, Expr], loop_names: set[str]) -> dict[str, int]:
    e = bound(ix, binding)
    terms, _ = affine(e)
    out: dict[str, int] = {}
    for atom, c in terms.items():
        if isinstance(atom, Var):
            if atom.name in loop_names:
                out[atom.name] = out.get(atom.name, 0) + abs(int(c))
        else:  # floordiv / floormod of loop variables: counted as a unit use of each
            for v in free_vars(atom):
                if v.name in loop_names:
                    out[v.name] = max(out.get(v.name, 0), 1)
    return out


def store_row(st: BufferStore, loops: list[For], binding: dict[str, Expr]) -> list[float]:
    names = {lp.var.name for lp in loops}
    extents = [lp.extent for lp in loops]
    iterations = math.prod(extents) if extents else 1

    # computation
    counts = dict.fromkeys(_COMPUTE, 0)
    for e in walk(st.value):
        if isinstance(e, BinOp):
            if e.op in ("add", "sub"):
                counts["add_sub"] += 1
            elif e.op == "mul":
                counts["mul"] += 1
            elif e.op in ("div", "pow"):
                counts["div"] += 1
            elif e.op in ("max", "min"):
                counts["max_min"] += 1
        elif isinstance(e, Call):
            counts["math_call"] += 1
        elif isinstance(e, (Cmp, Select)):
            counts["compare_select"] += 1
        elif isinstance(e, Cast):
            counts["cast"] += 1
    counts["fma"] = min(counts["add_sub"], counts["mul"])
    flops_per_exec = max(1, counts["add_sub"] + counts["mul"] + counts["div"] + counts["max_min"] + counts["math_call"])
    row = [_log(counts[c] * iterations) for c in _COMPUTE]

    # annotations
    for kind in ANNOTATIONS:
        marked = [i for i, lp in enumerate(loops) if lp.kind == kind]
        if not marked:
            row += [0.0, 0.0, 0.0, 0.0]
            continue
        row += [float(len(marked)), _log(math.prod(loops[i].extent for i in marked)), _log(loops[marked[-1]].extent),
                float(marked[-1] == len(loops) - 1)]

    # buffer accesses
    accesses = [_Access(st.buffer.name, st.buffer.shape, st.buffer.dtype.bits // 8,
                        tuple(_index_coeffs(ix, binding, names) for ix in st.indices), True)]
    for e in walk(st.value):
        if isinstance(e, BufferLoad):
            accesses.append(_Access(e.buffer.name, e.buffer.shape, e.buffer.dtype.bits // 8,
                                    tuple(_index_coeffs(ix, binding, names) for ix in e.indices), False))
    by_buffer: dict[str, list[_Access]] = {}
    for a in accesses:
        by_buffer.setdefault(a.buffer, []).append(a)
    buffer_rows = [_buffer_row(accs, loops, iterations) for accs in by_buffer.values()]
    buffer_rows.sort(key=lambda r: -r[3])
    for b in range(MAX_BUFFERS):
        row += buffer_rows[b] if b < len(buffer_rows) else [0.0] * len(_BUFFER)

    # arithmetic intensity per loop level (level l: the loops l.. innermost)
    curve = []
    for level in range(len(loops) + 1):
        inner = loops[level:]
        flops = flops_per_exec * math.prod(lp.extent for lp in inner)
        unique = sum(_unique_bytes(accs[0], inner) for accs in by_buffer.values())
        curve.append(flops / max(1, unique))
    xs = np.linspace(0, len(curve) - 1, CURVE_POINTS)
    row += [_log(v) for v in np.interp(xs, range(len(curve)), curve)]

    local = st.buffer.scope != "global"
    row += [_log(math.prod(st.buffer.shape) if local else 0), float(local), float(len(loops)), _log(iterations),
            float(sum(lp.extent == 1 for lp in loops))]
    return row


def _footprint(coeffs: dict[str, int], loops: list[For], dim_extent: int) -> int:
    span = 1 + sum(coeffs.get(lp.var.name, 0) * (lp.extent - 1) for lp in loops)
    return max(1, min(dim_extent, span))


def _unique_bytes(a: _Access, loops: list[For]) -> int:
    return a.elem_bytes * math.prod(_footprint(c, loops, d) for c, d in zip(a.coeffs, a.shape))


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.insert(0, acc)
        acc *= d
    return out


def _buffer_row(accs: list[_Access], loops: list[For], iterations: int) -> list[float]:
    a = accs[0]
    reads = any(not x.write for x in accs)
    writes = any(x.write for x in accs)
    count = len(accs)
    nbytes = iterations * a.elem_bytes * count
    unique = _unique_bytes(a, loops)
    strides = _strides(a.shape)
    flat = {}
    for dim_coeffs, s in zip(a.coeffs, strides):
        for name, c in dim_coeffs.items():
            flat[name] = flat.get(name, 0) + c * s
    varying = [lp for lp in loops if lp.extent > 1]
    inner = varying[-1] if varying else None
    stride = flat.get(inner.var.name, 0) if inner is not None else 0
    if stride == 0:
        lines = iterations / max(1, inner.extent if inner is not None else 1)
    else:
        lines = iterations * min(1.0, stride * a.elem_bytes / CACHE_LINE)
    last = a.coeffs[-1] if a.coeffs else {}
    last_extent = _footprint(last, loops, a.shape[-1]) if a.shape else 1
    unique_lines = (unique / max(1, last_extent * a.elem_bytes)) * math.ceil(last_extent * a.elem_bytes / CACHE_LINE)
    # reuse: the innermost loop (extent > 1) whose variable the index does not use
    reuse_at = next((i for i in range(len(loops) - 1, -1, -1)
                     if loops[i].extent > 1 and loops[i].var.name not in flat), None)
    if reuse_at is None:
        reuse = [0.0, 0.0, 0.0, 0.0, _log(nbytes), _log(unique)]
    else:
        inside = loops[reuse_at + 1:]
        reuse_count = loops[reuse_at].extent
        reuse = [1.0, _log(math.prod(lp.extent for lp in inside)), _log(_unique_bytes(a, inside)), _log(reuse_count),
                 _log(nbytes / reuse_count), _log(unique / reuse_count)]
    rw = reads and writes
    return [float(reads and not writes), float(writes and not reads), float(rw), _log(nbytes), _log(unique),
            _log(lines), _log(unique_lines), _log(stride), *reuse]
