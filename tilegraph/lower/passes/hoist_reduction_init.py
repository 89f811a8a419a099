"""hoist_reduction_init: give every block's `init` its own place in the loop nest.

Where possible the init becomes a separate nest placed just before the outermost loop that feeds
a reduce binding (decompose_reduction semantics); its loops are copies of the spatial loops
between that loop and the block:

    for i in range(M):                          for i in range(M):
      for k in range(K):                          for j_init in range(N):
        for j in range(N):                          block C_init(v_i=i, v_j=j_init, v_k*=0):
          block C(v_i=i, v_j=j, v_k*=k):              C[v_i, v_j] = 0.0f
            init: C[v_i, v_j] = 0.0f     ==>      for k in range(K):
            C[v_i, v_j] += ...                      for j in range(N):
                                                      block C(v_i=i, v_j=j, v_k*=k):
                                                        C[v_i, v_j] += ...

Otherwise (a spatial binding depends on a reduce loop, a non-affine reduce binding, a loop or
condition in between that cannot be copied, ...) the init stays in the block under a guard:

    block C(...):  if (v_k == 0): C[v_i, v_j] = 0.0f
                   C[v_i, v_j] += ...
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.ir import Block, BufferStore, For, Func, Seq, Stmt, seq
from tilegraph.loop.ir import IfThenElse as If
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import replace_node, rewrite_stmt, stmt_children, walk_stmts
from tilegraph.lower.passes.common import all_loop_names, linear_in, uses
from tilegraph.te.expr import BufferLoad, Const, Expr, Var, all_of
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, walk


def run(func: Func, target: object) -> Func:
    while True:
        blk = next((b for b in walk_stmts(func.body) if isinstance(b, Block) and b.init is not None), None)
        if blk is None:
            return func
        func = _hoist(func, blk) or _guard(func, blk)


def _guard(func: Func, blk: Block) -> Func:
    reduce_vars = [iv.var for iv in blk.iter_vars if iv.kind == "reduce"]
    cond = simplify(all_of(*(v.eq(0) for v in reduce_vars)))
    init = blk.init if isinstance(cond, Const) and cond.value is True else If(cond, blk.init)
    return replace_node(func, blk, replace(blk, init=None, body=seq(init, blk.body)))


def _path_to(root: Stmt, target: Stmt) -> list[Stmt] | None:
    """Ancestors of `target` (found by identity), outermost first."""
    if root is target:
        return []
    for kid in stmt_children(root):
        sub = _path_to(kid, target)
        if sub is not None:
            return [root, *sub]
    return None


def _buffers_touched(s: Stmt) -> set[str]:
    names: set[str] = set()
    for x in walk_stmts(s):
        exprs: list[Expr] = []
        if isinstance(x, BufferStore):
            names.add(x.buffer.name)
            exprs = [*x.indices, x.value]
        elif isinstance(x, Block):
            exprs = [*x.bindings, x.predicate]
        elif isinstance(x, If):
            exprs = [x.cond]
        for e in exprs:
            names.update(n.buffer.name for n in walk(e) if isinstance(n, BufferLoad))
    return names


def _hoist(func: Func, blk: Block) -> Func | None:
    path = _path_to(func.body, blk)
    assert path is not None
    loops = [s for s in path if isinstance(s, For)]
    reduce_bindings = [b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce"]
    feeding = [lp for lp in loops if any(uses(b, lp.var) for b in reduce_bindings)]
    if not feeding:
        return None
    outer = feeding[0]
    below = path[path.index(outer):]
    if any(not isinstance(s, (For, Seq)) for s in below):
        return None
    for b in reduce_bindings:
        for lp in feeding:
            form = linear_in(b, lp.var)
            if form is None or (uses(b, lp.var) and form[0] <= 0):
                return None
    zero: dict[Var, Expr] = {lp.var: Const(0) for lp in feeding}
    if any(not (isinstance(simplify(substitute(b, zero)), Const) and simplify(substitute(b, zero)).value == 0)
           for b in reduce_bindings):
        return None
    spatial_bindings = [b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind != "reduce"]
    if any(uses(b, lp.var) for b in spatial_bindings for lp in feeding):
        return None
    written = {s.buffer.name for s in walk_stmts(blk.init) if isinstance(s, BufferStore)}
    others = [x for x in walk_stmts(outer) if isinstance(x, Block) and x is not blk]
    if any(_buffers_touched(o) & written for o in others):
        return None

    feeding_ids = {id(lp) for lp in feeding}
    kept = [lp for lp in loops[loops.index(outer):] if id(lp) not in feeding_ids]
    taken = all_loop_names(func.body)
    mapping: dict[Var, Expr] = dict(zero)
    copies: list[For] = []
    for lp in kept:
        name = fresh_name(f"{lp.var.name}_init", taken)
        taken.add(name)
        mapping[lp.var] = Var(name, lp.var.dtype)
        copies.append(replace(lp, var=Var(name, lp.var.dtype)))
    init_block = Block(
        name=f"{blk.name}_init",
        iter_vars=blk.iter_vars,
        bindings=tuple(simplify(substitute(b, mapping)) for b in blk.bindings),
        body=blk.init,
        init=None,
        predicate=simplify(substitute(blk.predicate, mapping)),
    )
    nest: Stmt = init_block
    for lp in reversed(copies):
        nest = replace(lp, body=nest)
    new_outer = rewrite_stmt(outer, lambda s: replace(blk, init=None) if s is blk else None)
    return replace_node(func, outer, seq(nest, new_outer))
