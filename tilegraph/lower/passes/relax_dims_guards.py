"""relax_dims_guards: a spatial axis's run-time bound is not tested where nothing needs the test.

Elements of a tensor past its run-time extent are unspecified (te/dims.py), so an instance of a
block past the bound of one of its *spatial* axes may run or not: what it writes is unspecified,
and it reads within storage, as at the upper bounds, unless an index depends on data or on a dim
(a gather's ids past n are garbage; `x[n - 1 - i]` is negative past n). Where no index of the
block's body reads memory, its spatial guards are dropped, so a register tile's rows are not
tested one by one inside the reduction loop:

    block C(v_i=i_0*8 + i_1, v_k=k) if i_0*8 + i_1 < n and k < m:   ==>   block C(...) if k < m:
      C_local[v_i, ...] += A[v_i, v_k] * B[v_k, ...]

Reduction guards (`k < m`) always stay: the sum over [0, m) must not take the elements past m.
skip_past_dims, which runs first, has already lifted the guards to the outermost loops, where
whole tiles past the bounds are skipped.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Block, BufferStore, Func, Stmt
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.dims import DIMS_INPUT, dims_guards
from tilegraph.te.expr import BufferLoad, all_of, conjuncts
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import walk


def run(func: Func, target: object) -> Func:
    if not any(p.name == DIMS_INPUT for p in func.params):
        return func
    return replace(func, body=rewrite_stmt(func.body, _relax))


def _relax(s: Stmt) -> Stmt | None:
    if not isinstance(s, Block) or not _indexes_within_storage(s):
        return None
    spatial = {simplify(b) for iv, b in zip(s.iter_vars, s.bindings) if iv.kind == "spatial"}
    droppable = [g for g in dims_guards(s.predicate) if simplify(g.a) in spatial]
    if not droppable:
        return None
    return replace(s, predicate=all_of(*(c for c in conjuncts(s.predicate) if c not in droppable)))


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


__all__ = ["run"]
