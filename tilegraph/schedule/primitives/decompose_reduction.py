"""decompose_reduction: split a reduction block's init out into its own block before a loop.

    for i in range(8):
      for k in range(16):
        for j in range(4):
          block C(v_i=i, v_j=j, v_k*=k):
            init: C[v_i, v_j] = 0.0f
            C[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]

        decompose_reduction(C, k)

    for i in range(8):
      for j_init in range(4):
        block C_init(v_i=i, v_j=j_init):
          C[v_i, v_j] = 0.0f
      for k in range(16):
        for j in range(4):
          block C(v_i=i, v_j=j, v_k*=k):
            C[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]

The init block gets copies of the loops between `loop` (included) and the block that feed its
spatial variables (fresh names `<loop>_init`, same extents and kinds), and the conjuncts of the
block's predicate that do not involve reduction loops. It is placed right before `loop`; the
original block loses its init.

Legal when the init, run once before `loop`, does what it did inside: `loop` encloses the block
and every loop that drives a reduce variable is `loop` or inside it; each reduce binding grows with
the loops that drive it and is 0 at their first iteration (the init ran at the first reduction
step); only loops stand between `loop` and the block (no condition, allocation or other block
decides whether the init runs); and no other block under `loop` reads or writes what the init
writes. Lowering decomposes every remaining init with this primitive (lower/passes/
hoist_reduction_init.py), so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import replace_node, substitute_stmt
from tilegraph.loop.ir import TRUE, Block, BlockVar, BufferStore, For, Func, Seq, Stmt
from tilegraph.loop.visit import loads_under, walk_stmts
from tilegraph.schedule.primitives.common import get_block, get_loop, require
from tilegraph.schedule.primitives.nest import (
    conjunction,
    fresh_block_name,
    fresh_loop_vars,
    insert_beside,
    loops_enclosing,
    path_to,
)
from tilegraph.te.arith import linear_in
from tilegraph.te.expr import Const, Expr, Var, conjuncts
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import free_vars, substitute, uses_var


def decompose_reduction(func: Func, block: str, loop: str) -> tuple[Func, tuple[str, ...]]:
    where = f"decompose_reduction({block}, {loop})"
    target = get_block(func, block)
    require(target.init is not None, f"{where}: block {block} has no init (not a reduction, or already decomposed)")
    assert target.init is not None
    lp = get_loop(func, loop)
    enclosing = loops_enclosing(func, target)
    position = [n for n, x in enumerate(enclosing) if x is lp]
    require(bool(position), f"{where}: loop {loop} does not enclose block {block}")
    above, inner = enclosing[: position[0]], enclosing[position[0]:]
    spatial = [(iv, b) for iv, b in zip(target.iter_vars, target.bindings) if iv.kind == "spatial"]
    reduce_binds = [b for iv, b in zip(target.iter_vars, target.bindings) if iv.kind == "reduce"]
    for x in above:
        require(not any(uses_var(b, x.var) for b in reduce_binds),
                f"{where}: loop {x.var.name} outside {loop} drives a reduce variable of {block}; "
                "the init would run once per reduction step")
    copied: list[For] = []
    for x in inner:
        feeds_spatial = any(uses_var(b, x.var) for _, b in spatial)
        feeds_reduce = any(uses_var(b, x.var) for b in reduce_binds)
        require(not (feeds_spatial and feeds_reduce),
                f"{where}: loop {x.var.name} feeds both spatial and reduce variables of {block}")
        if feeds_spatial:
            copied.append(x)
    feeding = [x for x in inner if any(uses_var(b, x.var) for b in reduce_binds)]
    for b in reduce_binds:
        for x in feeding:
            form = linear_in(b, x.var)
            require(form is not None, f"{where}: a reduce binding of {block} is not affine in loop {x.var.name}")
            assert form is not None
            require(form[0] > 0 or not uses_var(b, x.var),
                    f"{where}: a reduce variable of {block} does not grow with loop {x.var.name}")
    at_start = {x.var: Const(0) for x in feeding}
    require(all(simplify(substitute(b, at_start)) == Const(0) for b in reduce_binds),
            f"{where}: the reduce variables of {block} are not 0 at the first step of {loop}; the init ran elsewhere")
    between = path_to(func, target)
    between = between[next(n for n, s in enumerate(between) if s is lp):-1]
    require(all(isinstance(s, (For, Seq)) for s in between),
            f"{where}: a condition or allocation between {loop} and {block} decides whether the init runs")
    init_writes = {s.buffer.name for s in walk_stmts(target.init) if isinstance(s, BufferStore)}
    for other in walk_stmts(lp):
        if isinstance(other, Block) and other is not target:
            touched = {s.buffer.name for s in walk_stmts(other) if isinstance(s, BufferStore)}
            touched |= {load.buffer.name for load in loads_under(other)}
            require(not (touched & init_writes),
                    f"{where}: block {other.name} under {loop} uses {sorted(touched & init_writes)[0]}, which the init writes")
    spatial_vars = {iv.var for iv, _ in spatial}
    new_vars = fresh_loop_vars(func, [f"{x.var.name}_init" for x in copied])
    mapping: dict[Var, Expr] = {x.var: nv for x, nv in zip(copied, new_vars)}
    # The init runs where every reduce variable is 0 (rfactor's inits index by one), so it may name
    # them as 0; it may also name the loops above `loop` (compacted buffers index by them) and the
    # copied loops (renamed), but no loop that drives the reduction.
    reduce_vars = {iv.var for iv in target.iter_vars if iv.kind == "reduce"}
    init_body = substitute_stmt(target.init, {**{v: Const(0, v.dtype) for v in reduce_vars}, **mapping})
    init_vars = {v for s in walk_stmts(init_body) for v in _stmt_vars(s)}
    allowed = spatial_vars | {x.var for x in above} | set(new_vars)
    require(init_vars <= allowed, f"{where}: the init of {block} uses a variable of a loop that drives its reduction")
    visible = {x.var for x in above} | set(mapping)
    kept = [c for c in conjuncts(target.predicate) if free_vars(c) <= visible]
    init_block = Block(
        fresh_block_name(func, f"{block}_init"),
        tuple(BlockVar(iv.var, iv.extent, "spatial") for iv, _ in spatial),
        tuple(simplify(substitute(b, mapping)) for _, b in spatial),
        init_body,
        None,
        conjunction([substitute(c, mapping) for c in kept]) if kept else TRUE,
    )
    nest: Stmt = init_block
    for x, nv in reversed(list(zip(copied, new_vars))):
        nest = For(nv, x.extent, x.kind, nest)
    result = replace_node(func, target, replace(target, init=None))
    result = insert_beside(result, get_loop(result, loop), nest, after=False)
    return result, (init_block.name,)


def _stmt_vars(s: Stmt) -> set[Var]:
    if isinstance(s, BufferStore):
        out: set[Var] = set()
        for e in (*s.indices, s.value):
            out |= free_vars(e)
        return out
    return set()


__all__ = ["decompose_reduction"]
