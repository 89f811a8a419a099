"""relax_dims_guards: a spatial axis's run-time bound is not tested where nothing needs the test.

Elements of a tensor past its run-time extent are unspecified (te/dims.py), so an instance of a
block past the bound of one of its *spatial* axes may run or not: what it writes is unspecified,
and it reads within storage, as at the upper bounds, unless an index depends on data or on a dim
(a gather's ids past n are garbage; `x[n - 1 - i]` is negative past n). Where no index of the
block's body reads memory, its spatial guards are dropped, so a register tile's rows are not
tested one by one inside the reduction loop:

    block C(v_i=i_0*8 + i_1, v_k=k) if i_0*8 + i_1 < n and k < m:   ==>   block C(...) if k < m:
      C_local[v_i, ...] += A[v_i, v_k] * B[v_k, ...]

The same holds for a bucket's padding guard on such an axis (Workload.at: the loops run to the
bucket's upper bound, 32, the arrays keep the range's storage, 95 rows): a tile of 14 rows over 32
tests rows 28..41 against 32 one by one inside the reduction loop, and the compiler, short of
registers, spilled the accumulators (GPT-2's FC1 with its GELU at 32 tokens: 1.30 ms against 0.74
with the rows run). The padding guard is rounded up to the tile, where it tests the outer loop
alone and hoist_invariant_guards lifts it out of the reduction:

    block C(v_i=i_0*14 + i_1) if i_0*14 + i_1 < 32 and i_0*14 + i_1 < n   ==>   block C(...) if i_0*14 < 42:
      C_local[v_i - i_0*14, ...] += A[v_i, v_k] * ...                     (A's 95 rows hold row 41)

only where the run-time bound is at most the padding bound (the rows past it are past n) and
every access of the block stays in its storage for the rows run; the rounding of a bound that is
a multiple of the tile already is exact and always made.

Reduction guards (`k < m`) always stay: the sum over [0, m) must not take the elements past m.
skip_past_dims, which runs first, has already lifted the guards to the outermost loops, where
whole tiles past the bounds are skipped.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import transform_with_ranges
from tilegraph.loop.ir import Block, BufferStore, Func, Stmt
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.arith import Bounds, affine, affine_bounds, int_const, rebuild, value_bounds
from tilegraph.te.dims import DIMS_INPUT, dims_guards
from tilegraph.te.expr import BufferLoad, Cmp, Const, Expr, Var, all_of, conjuncts
from tilegraph.te.simplify import simplify, simplify_bounded
from tilegraph.te.visit import rewrite, substitute, walk

# a dims value (a load of the dims input, clamped by from_te) bounded by nothing of its own
_ANY = (-(2**31), 2**31 - 1)


def run(func: Func, target: object) -> Func:
    if not any(p.name == DIMS_INPUT for p in func.params):
        return func
    return replace(func, body=transform_with_ranges(func.body, _relax))


def _relax(s: Stmt, ranges: dict[str, Bounds]) -> Stmt | None:
    if not isinstance(s, Block) or not _indexes_within_storage(s):
        return None
    spatial = {simplify(b) for iv, b in zip(s.iter_vars, s.bindings) if iv.kind == "spatial"}
    droppable = [g for g in dims_guards(s.predicate) if simplify(g.a) in spatial]
    if not droppable:
        return None
    # each bounded axis's largest run-time bound: a padding guard at or above it guards nothing past n
    bounded = {simplify(g.a): _upper(g.b) for g in droppable}
    kept = [_rounded(c, s, bounded, ranges) for c in conjuncts(s.predicate) if c not in droppable]
    return replace(s, predicate=all_of(*kept))


def _indexes_within_storage(block: Block) -> bool:
    """Whether no index of a store or load in the block reads memory (a gather, a dim)."""
    for stmt in walk_stmts(block):
        if not isinstance(stmt, BufferStore):
            continue
        loads = [x for e in (*stmt.indices, stmt.value) for x in walk(e) if isinstance(x, BufferLoad)]
        indices = [*stmt.indices, *(i for load in loads for i in load.indices)]
        if any(isinstance(x, BufferLoad) for i in indices for x in walk(i)):
            return False
    return True


def _upper(bound: Expr) -> int | None:
    """The largest value of a dims guard's bound (`max(min(tg_dims[0], 32), 1)`: 32), or None."""
    loads: dict[Expr, Var] = {}

    def as_var(x: Expr) -> Expr | None:
        if isinstance(x, BufferLoad):
            return loads.setdefault(x, Var(f"tg_dim_value_{len(loads)}", x.dtype))
        return None

    free = rewrite(bound, as_var)
    bounds = value_bounds(free, {v.name: _ANY for v in loads.values()})
    return None if bounds is None else bounds[1]


def _rounded(guard: Expr, block: Block, bounded: dict[Expr, int | None], ranges: dict[str, Bounds]) -> Expr:
    """A padding guard `outer + inner < c` of a bounded axis (inner, the tile's loops, below the
    step of outer) as `outer < c rounded up to the step`; `guard` itself where that is not sure."""
    if not isinstance(guard, Cmp) or guard.op != "lt" or int_const(guard.b) is None:
        return guard
    index = simplify(guard.a)
    upper = bounded.get(index)
    limit = int_const(guard.b)
    if upper is None or upper > limit:
        return guard
    split = _tile_split(index, ranges)
    if split is None:
        return guard
    outer, step = split
    rounded = -(-limit // step) * step
    if rounded != limit and not _fits(block, index, rounded, ranges):
        return guard
    return Cmp("lt", outer, Const(rounded, guard.b.dtype))


def _tile_split(index: Expr, ranges: dict[str, Bounds]) -> tuple[Expr, int] | None:
    """(outer, step) with index = outer + inner, outer's coefficients multiples of step and inner
    within [0, step) over the loops: the smallest such step above 1 (the register tile's rows)."""
    terms, const = affine(index)
    if const != 0 or not terms or not all(isinstance(a, Var) and a.name in ranges for a in terms):
        return None
    if any(ranges[a.name][0] != 0 or c <= 0 for a, c in terms.items()):
        return None
    for step in sorted({c for c in terms.values() if c > 1}):
        inner = {a: c for a, c in terms.items() if c < step}
        outer = {a: c for a, c in terms.items() if c >= step}
        if not inner or any(c % step for c in outer.values()):
            continue
        if sum(c * ranges[a.name][1] for a, c in inner.items()) < step:
            return simplify(rebuild(outer, 0, index.dtype)), step
    return None


def _fits(block: Block, index: Expr, limit: int, ranges: dict[str, Bounds]) -> bool:
    """Whether every access of `block` stays within its buffer when the axis bound to `index` runs
    to `limit` - 1: an index of it is the axis plus a constant within the storage, or any index is
    within its storage over the whole of the loops (a tile's local buffer)."""
    bindings = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
    axis = next((iv.var for iv, b in zip(block.iter_vars, block.bindings) if simplify(b) == index), None)
    if axis is None:
        return False
    index_vars = {x for x in walk(index) if isinstance(x, Var)}
    for stmt in walk_stmts(block):
        if not isinstance(stmt, BufferStore):
            continue
        accesses = [(stmt.buffer, stmt.indices)]
        accesses += [(x.buffer, x.indices) for e in (*stmt.indices, stmt.value) for x in walk(e)
                     if isinstance(x, BufferLoad)]
        for buffer, indices in accesses:
            for i, extent in zip(indices, buffer.shape):
                in_loops = simplify_bounded(substitute(i, bindings), ranges)
                if not ({x for x in walk(in_loops) if isinstance(x, Var)} & index_vars):
                    continue  # takes the values it took before
                terms, const = affine(in_loops)
                bounds = affine_bounds(terms, const, ranges)
                if bounds is not None and 0 <= bounds[0] and bounds[1] < extent:
                    continue
                offset = _offset(i, axis)
                if offset is None or offset < 0 or limit - 1 + offset >= extent:
                    return False
    return True


def _offset(index: Expr, axis: Var) -> int | None:
    """d where index == axis + d, else None."""
    terms, const = affine(simplify(index))
    return const if terms == {axis: 1} else None


__all__ = ["run"]
