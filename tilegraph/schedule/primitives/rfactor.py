"""rfactor: turn one loop of a reduction into a spatial axis of a partial-result buffer.

    for i in range(4):
      for k_0 in range(3):
        for k_1 in range(4):
          block S(v_i=i, v_k*=k_0 * 4 + k_1) if k_0 * 4 + k_1 < 10:
            init: S[v_i] = 0.0f
            S[v_i] = S[v_i] + X[v_i, v_k]

        rfactor(S, k_1)

    for i in range(4):
      for k_0 in range(3):
        for k_1 in range(4):
          block S_rf(v_i=i, v_k_1=k_1, v_k_0*=k_0):
            init: S_rf[v_i, v_k_1] = 0.0f
            if v_k_0 * 4 + v_k_1 < 10:
              S_rf[v_i, v_k_1] = S_rf[v_i, v_k_1] + X[v_i, v_k_0 * 4 + v_k_1]
      for k_1_rf in range(4):
        block S(v_i=i, v_k_1*=k_1_rf):
          init: S[v_i] = 0.0f
          S[v_i] = S[v_i] + S_rf[v_i, v_k_1]

The rfactor block `<out>_rf` (fresh) keeps the block's loop nest and writes the buffer of the same
name, shape (*out.shape, extent(loop)) in `scope` ("local": a per-thread array once lowering has
compacted it to the iteration that uses it); `loop` becomes a spatial variable there (so it can be
vectorized or run in parallel) and every other loop that drove a reduce variable becomes a reduce
variable of its own. The rf block starts from the combiner's identity, so lanes that receive no
value (tails of non-dividing splits) stay neutral; guards that involve reduction loops move from
its predicate into its body for the same reason. The original block keeps its name and init (which
therefore runs exactly once per output element) and reduces the rf buffer over a new loop
`<loop>_rf`; its nest (copies of the spatial loops inside the outermost reduction loop) is placed
right after that outermost reduction loop. A `where` condition stays in the rf block.

Legal when the block body is `out[idx] = out[idx] ⊕ value` (⊕ in sum/max/min, optionally under a
`where` select), `loop` encloses the block, drives one of its reduce variables and no spatial one,
and no loop drives both kinds.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import SCOPES, Block, BlockVar, Buffer, BufferStore, For, Func, IfThenElse, Stmt
from tilegraph.loop.names import fresh_name
from tilegraph.schedule.primitives.common import get_block, get_loop, require
from tilegraph.schedule.primitives.nest import (
    check_dataflow,
    conjunction,
    fresh_buffer_name,
    fresh_loop_vars,
    insert_beside,
    loops_enclosing,
)
from tilegraph.te.expr import BinOp, BufferLoad, Expr, Select, Var, combine, conjuncts, identity_of
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import free_vars, substitute, uses_var, walk

_COMBINER_OF_OP = {"add": "sum", "max": "max", "min": "min"}


@dataclass(frozen=True)
class Reduction:
    """out[indices] = out[indices] ⊕ source, applied only where `condition` holds (None: always)."""

    out: Buffer
    indices: tuple[Expr, ...]
    combiner: str
    source: Expr
    condition: Expr | None
    guard: Expr | None  # an `if` around the store (left by an earlier rfactor)


def rfactor(func: Func, block: str, loop: str, scope: str = "global") -> tuple[Func, tuple[str, ...]]:
    where = f"rfactor({block}, {loop})"
    require(scope in SCOPES, f"{where}: unknown scope {scope!r}; use one of {SCOPES}")
    target = get_block(func, block)
    lp = get_loop(func, loop)
    red = match_reduction(target, where)
    enclosing = loops_enclosing(func, target)
    require(any(x is lp for x in enclosing), f"{where}: loop {loop} does not enclose block {block}")

    spatial = [(iv, b) for iv, b in zip(target.iter_vars, target.bindings) if iv.kind == "spatial"]
    reduce_ = [(iv, b) for iv, b in zip(target.iter_vars, target.bindings) if iv.kind == "reduce"]
    feeds_reduce = [x for x in enclosing if any(uses_var(b, x.var) for _, b in reduce_)]
    for x in feeds_reduce:
        require(not any(uses_var(b, x.var) for _, b in spatial),
                f"{where}: loop {x.var.name} feeds both spatial and reduce variables of {block}")
    require(any(x is lp for x in feeds_reduce), f"{where}: loop {loop} does not drive a reduce variable of {block}")
    spatial_vars = {iv.var for iv, _ in spatial}
    require(all(free_vars(i) <= spatial_vars for i in red.indices),
            f"{where}: block {block} stores at indices that depend on reduce variables")

    name = fresh_buffer_name(func, f"{red.out.name}_rf")
    rf_buf = Buffer(name, (*red.out.shape, lp.extent), red.out.dtype, scope)
    rf_block, moved = _rf_block(target, red, rf_buf, lp, feeds_reduce, spatial)
    anchor = feeds_reduce[0]
    result = replace_node(func, target, rf_block)
    wb_nest = _reduce_rf_nest(result, target, red, rf_buf, lp, enclosing, anchor, spatial, moved)
    result = insert_beside(result, get_loop(result, anchor.var.name), wb_nest, after=True)
    result = Func(result.name, result.params, result.body, (*result.allocs, rf_buf), result.attrs)
    check_dataflow(result, where)
    return result, (name,)


def match_reduction(b: Block, where: str) -> Reduction:
    body, guard = b.body, None
    if isinstance(body, IfThenElse) and body.else_body is None:
        body, guard = body.then_body, body.cond
    shape_hint = "out[idx] = out[idx] (+|max|min) value"
    require(isinstance(body, BufferStore), f"{where}: block {b.name} is not a single reduction store ({shape_hint})")
    assert isinstance(body, BufferStore)
    acc = BufferLoad(body.buffer, body.indices)
    value, condition = body.value, None
    if isinstance(value, Select) and value.false_value == acc:
        value, condition = value.true_value, value.cond
    require(isinstance(value, BinOp) and value.op in _COMBINER_OF_OP and acc in (value.a, value.b),
            f"{where}: block {b.name} is not a sum/max/min reduction ({shape_hint})")
    assert isinstance(value, BinOp)
    source = value.b if value.a == acc else value.a
    reads_out = any(isinstance(e, BufferLoad) and e.buffer.name == body.buffer.name for e in walk(source))
    require(not reads_out, f"{where}: block {b.name} reads its output {body.buffer.name} outside the accumulation")
    require(any(iv.kind == "reduce" for iv in b.iter_vars), f"{where}: block {b.name} has no reduce variable")
    return Reduction(body.buffer, body.indices, _COMBINER_OF_OP[value.op], source, condition, guard)


def _rf_block(target: Block, red: Reduction, rf_buf: Buffer, lp: For, feeds_reduce: list[For],
              spatial: list[tuple[BlockVar, Expr]]) -> tuple[Block, list[Expr]]:
    """The partial-result block and the predicate conjuncts it moved into its body."""
    taken = {iv.var.name for iv in target.iter_vars}
    as_block_var: dict[Var, Var] = {}
    rf_iter = [iv for iv, _ in spatial]
    rf_bind = [b for _, b in spatial]
    for x in [lp, *(x for x in feeds_reduce if x is not lp)]:
        var_name = fresh_name(f"v_{x.var.name}", taken)
        taken.add(var_name)
        as_block_var[x.var] = Var(var_name)
        rf_iter.append(BlockVar(Var(var_name), x.extent, "spatial" if x is lp else "reduce"))
        rf_bind.append(x.var)
    old_reduce = {iv.var: simplify(substitute(b, as_block_var))
                  for iv, b in zip(target.iter_vars, target.bindings) if iv.kind == "reduce"}
    lane_index = (*red.indices, as_block_var[lp.var])
    acc = BufferLoad(rf_buf, lane_index)
    value = combine(red.combiner, acc, substitute(red.source, old_reduce))
    if red.condition is not None:
        value = Select(substitute(red.condition, old_reduce), value, acc)
    body: Stmt = BufferStore(rf_buf, lane_index, value)

    reduce_loops = set(as_block_var)
    moved = [c for c in conjuncts(target.predicate) if free_vars(c) & reduce_loops]
    kept = [c for c in conjuncts(target.predicate) if not free_vars(c) & reduce_loops]
    guards = [substitute(c, as_block_var) for c in moved]
    if red.guard is not None:
        guards.append(substitute(red.guard, old_reduce))
    if guards:
        body = IfThenElse(conjunction(guards), body)
    init = BufferStore(rf_buf, lane_index, identity_of(red.combiner, red.out.dtype))
    block = Block(rf_buf.name, tuple(rf_iter), tuple(rf_bind), body, init, conjunction(kept))
    return block, moved


def _reduce_rf_nest(func: Func, target: Block, red: Reduction, rf_buf: Buffer, lp: For, enclosing: list[For],
                    anchor: For, spatial: list[tuple[BlockVar, Expr]], moved: list[Expr]) -> Stmt:
    """The original block, now reducing the rf buffer over its last axis, in its own loop nest."""
    start = next(i for i, x in enumerate(enclosing) if x is anchor)
    outer, inner = enclosing[:start], enclosing[start:]
    copied = [x for x in inner if any(uses_var(b, x.var) for _, b in spatial)]
    new_vars = fresh_loop_vars(func, [*(f"{x.var.name}_rf" for x in copied), f"{lp.var.name}_rf"])
    mapping: dict[Var, Expr] = {x.var: v for x, v in zip(copied, new_vars)}
    lane_loop = new_vars[-1]

    taken = {iv.var.name for iv, _ in spatial}
    lane_var = Var(fresh_name(f"v_{lp.var.name}", taken))
    iter_vars = (*(iv for iv, _ in spatial), BlockVar(lane_var, lp.extent, "reduce"))
    bindings = (*(simplify(substitute(b, mapping)) for _, b in spatial), lane_loop)
    acc = BufferLoad(red.out, red.indices)
    body = BufferStore(red.out, red.indices, combine(red.combiner, acc, BufferLoad(rf_buf, (*red.indices, lane_var))))

    visible = {x.var for x in outer} | set(mapping)
    kept = [substitute(c, mapping) for c in conjuncts(target.predicate)
            if c not in moved and free_vars(c) <= visible]
    block = Block(target.name, iter_vars, bindings, body, target.init, conjunction(kept))
    nest: Stmt = For(lane_loop, lp.extent, "serial", block)
    for x, v in reversed(list(zip(copied, new_vars))):
        nest = For(v, x.extent, "serial", nest)
    return nest


__all__ = ["Reduction", "match_reduction", "rfactor"]
