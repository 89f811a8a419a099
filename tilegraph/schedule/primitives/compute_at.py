"""compute_at: move a producer block under a loop of its consumer, computing only what the
consumer reads in one iteration of that loop.

    for ax0 in range(64):                          compute_at(P, jo)     for jo in range(2):
      for ax1 in range(50):                       ------------------->     for ax0_1 in range(32):
        block P(v0=ax0, v1=ax1): P[v0, v1] = ...                              for ax1_1 in range(50):
    for jo in range(2):                                                         block P(v0=jo * 32 + ax0_1, v1=ax1_1): ...
      for ji in range(32):                                                    for ji in range(32):
        for k in range(50):                                                     for k in range(50):
          block C(v_j=jo * 32 + ji, v_k*=k): ... P[v_j, v_k] ...                  block C(...): ... P[v_j, v_k] ...

The region is found by bounding the consumers' load indices (block bindings substituted) over the
loops inside `loop`, with `loop` and the loops around it held fixed (see tilegraph.loop.region).
The producer's loops are regenerated: one fresh loop per iteration variable (spatial ones over the
region, reduce ones over their full extent); its bindings become region_start + new loop var, and
a predicate keeps it inside the buffer where the region may stick out. The producer must store at
its own iteration point (buffer[v0, v1, ...]), be the only writer of an intermediate buffer, and
every reader of that buffer must lie under `loop`. The new nest is placed before the first
statement of the loop body that reads the buffer (the start of the body in the usual case).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.errors import ScheduleError
from tilegraph.loop.ir import Block, Buffer, BufferStore, For, Func, Stmt
from tilegraph.loop.region import Interval, RegionError, access_region, accesses, constant_bounds
from tilegraph.loop.visit import walk_stmts
from tilegraph.schedule.primitives.common import get_block, get_loop, require
from tilegraph.schedule.primitives.nest import (
    block_nest,
    check_dataflow,
    child_holding,
    conjunction,
    fresh_loop_vars,
    insert_beside,
    is_alloc,
    loops_enclosing,
    readers,
    remove_nest,
    stored_buffers,
    writers,
)
from tilegraph.te.dims import dims_guards
from tilegraph.te.expr import Const, Expr
from tilegraph.te.simplify import simplify


def compute_at(func: Func, block: str, loop: str) -> tuple[Func, tuple[str, ...]]:
    where = f"compute_at({block}, {loop})"
    producer = get_block(func, block)
    get_loop(func, loop)
    buf = single_output(producer, where)
    require(is_alloc(func, buf.name), f"{where}: block {block} writes {buf.name}, an output of {func.name}; "
                                      "only blocks that compute intermediate buffers can move")
    others = [w for w in writers(func.body, buf.name) if w != block]
    require(not others, f"{where}: buffer {buf.name} is also written by block(s) {others}")
    require_stores_at_iteration_point(producer, buf, where)
    nest, _ = block_nest(func, producer)
    require(not any(isinstance(s, For) and s.var.name == loop for s in walk_stmts(nest)),
            f"{where}: loop {loop} belongs to block {block}'s own loop nest")

    stripped = remove_nest(func, producer)
    target = get_loop(stripped, loop)
    require(target.kind != "vectorized", f"{where}: loop {loop} is vectorized; a loop nest cannot go inside it")
    under = readers(target.body, buf.name)
    require(bool(under), f"{where}: no block under loop {loop} reads {buf.name}, so loop {loop} does not enclose "
                         f"a consumer of {block}")
    outside = [r for r in readers(stripped.body, buf.name) if r not in under]
    require(not outside, f"{where}: block(s) {outside} outside loop {loop} also read {buf.name}")
    try:
        region = access_region(accesses(target.body, buf.name, writes=False), what=buf.name)
    except RegionError as e:
        raise ScheduleError(f"{where}: {e}") from None

    enclosing = [*loops_enclosing(stripped, target), target]
    new_nest = regenerate_nest(func, producer, region, enclosing)
    anchor = child_holding(target.body, lambda s: bool(readers(s, buf.name)))
    assert anchor is not None
    result = insert_beside(stripped, anchor, new_nest, after=False)
    check_dataflow(result, where)
    return result, ()


def single_output(b: Block, where: str) -> Buffer:
    outs = stored_buffers(b)
    require(len(outs) == 1, f"{where}: block {b.name} writes {len(outs)} buffers {[o.name for o in outs]}; need exactly one")
    return outs[0]


def require_stores_at_iteration_point(b: Block, buf: Buffer, where: str) -> None:
    spatial = tuple(iv.var for iv in b.iter_vars if iv.kind == "spatial")
    for s in walk_stmts(b):
        if isinstance(s, BufferStore) and s.buffer.name == buf.name:
            require(s.indices == spatial,
                    f"{where}: block {b.name} must store {buf.name} at its own iteration point {list(map(str, spatial))}")
    require(tuple(iv.extent for iv in b.iter_vars if iv.kind == "spatial") == buf.shape,
            f"{where}: the spatial iteration domain of block {b.name} differs from the shape of {buf.name}")


def _dims_guards_moved(b: Block, new_bindings: list[Expr]) -> list[Expr]:
    """The block's run-time dims guards (te/dims.py: `binding of v < N`) rewritten for its new
    bindings: unlike the guards of its old loops' tails, which the fresh loops' own guards replace,
    they say which instances exist at all. A guard that is no binding of the block is refused."""
    old = {simplify(binding): new for binding, new in zip(b.bindings, new_bindings)}
    moved = []
    for guard in dims_guards(b.predicate):
        index = simplify(guard.a)
        require(index in old, f"block {b.name}: its run-time dims guard {guard} is not on one of its variables")
        moved.append(old[index].lt(guard.b))
    return moved


def regenerate_nest(func: Func, b: Block, region: list[Interval], enclosing: list[For]) -> Stmt:
    """Fresh loops running `b` over `region` of its spatial domain (reduce vars over their full
    extent), guarded to stay inside the domain. `enclosing` are the loops the nest will sit in."""
    spatial = [iv for iv in b.iter_vars if iv.kind == "spatial"]
    require(len(spatial) == len(region), f"block {b.name}: {len(spatial)} spatial variables, region of {len(region)}")
    new_vars = fresh_loop_vars(func, [_loop_base(iv.var.name) for iv in b.iter_vars])
    ranges = {lp.var: lp.extent for lp in enclosing}
    bindings: list[Expr] = []
    conds: list[Expr] = []
    extents: list[int] = []
    dims = iter(region)
    for iv, nv in zip(b.iter_vars, new_vars):
        if iv.kind == "reduce":
            bindings.append(nv)
            extents.append(iv.extent)
            continue
        r = next(dims)
        start, extent = r.start, r.extent
        if isinstance(start, Const):
            lo, hi = max(start.value, 0), min(start.value + extent, iv.extent)
            start, extent = Const(lo), max(hi - lo, 1)
        binding = simplify(start + nv)
        bounds = constant_bounds(binding, {**ranges, nv: extent})
        if bounds is None or bounds[0] < 0:
            conds.append(binding.ge(0))
        if bounds is None or bounds[1] >= iv.extent:
            conds.append(binding.lt(iv.extent))
        bindings.append(binding)
        extents.append(extent)
    conds += _dims_guards_moved(b, bindings)
    stmt: Stmt = replace(b, bindings=tuple(bindings), predicate=conjunction(conds))
    for nv, extent in reversed(list(zip(new_vars, extents))):
        stmt = For(nv, extent, "serial", stmt)
    return stmt


def _loop_base(iter_var_name: str) -> str:
    return iter_var_name[2:] if iter_var_name.startswith("v_") and len(iter_var_name) > 2 else f"ax{iter_var_name[1:]}"


__all__ = ["compute_at", "regenerate_nest", "require_stores_at_iteration_point", "single_output"]
