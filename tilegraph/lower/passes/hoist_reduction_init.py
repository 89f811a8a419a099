"""hoist_reduction_init: give every block's `init` its own place in the loop nest.

Where the schedule primitive decompose_reduction allows it (its legality rules are the only ones),
the init becomes a separate nest placed just before the outermost loop that feeds a reduce
binding; its loops are copies of the spatial loops between that loop and the block:

    for i in range(M):                          for i in range(M):
      for k in range(K):                          for j_init in range(N):
        for j in range(N):                          block C_init(v_i=i, v_j=j_init):
          block C(v_i=i, v_j=j, v_k*=k):              C[v_i, v_j] = 0.0f
            init: C[v_i, v_j] = 0.0f     ==>      for k in range(K):
            C[v_i, v_j] += ...                      for j in range(N):
                                                      block C(v_i=i, v_j=j, v_k*=k):
                                                        C[v_i, v_j] += ...

Otherwise (a loop feeding both spatial and reduce variables, a non-affine reduce binding, a
condition in between, ...) the init stays in the block under a guard:

    block C(...):  if (v_k == 0): C[v_i, v_j] = 0.0f
                   C[v_i, v_j] += ...
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.errors import ScheduleError
from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import Block, Func, seq
from tilegraph.loop.ir import IfThenElse as If
from tilegraph.loop.visit import loops_above, walk_stmts
from tilegraph.schedule.primitives.decompose_reduction import decompose_reduction
from tilegraph.te.expr import Const, all_of
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import uses_var


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


def _hoist(func: Func, blk: Block) -> Func | None:
    """decompose_reduction at the outermost loop that drives a reduce variable, when it is legal."""
    feeding = [lp for lp in loops_above(func, blk.name)
               if any(uses_var(b, lp.var) for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce")]
    if not feeding:
        return None
    try:
        return decompose_reduction(func, blk.name, feeding[0].var.name)[0]
    except ScheduleError:
        return None
