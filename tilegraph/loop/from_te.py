"""Workload -> the naive loop nest: one loop per axis, one block per compute tensor.

    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k))
becomes
    for i in range(M):
      for j in range(N):
        for k in range(K):
          block C(v_i=i, v_j=j, v_k=k; v_i, v_j spatial, v_k reduce):
            init: C[v_i, v_j] = 0
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
"""

from __future__ import annotations

from tilegraph.loop.ir import Block, BlockVar, Buffer, BufferStore, For, Func, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.te.expr import (
    BufferLoad,
    Expr,
    Reduce,
    Select,
    TensorRead,
    Var,
    combine,
    identity_of,
)
from tilegraph.te.tensor import Tensor
from tilegraph.te.visit import rewrite
from tilegraph.te.workload import Workload


def workload_to_func(workload: Workload) -> Func:
    """The unscheduled loop nest of a workload (the starting point of every schedule)."""
    buffers = {id(t): Buffer(t.name, t.shape, t.dtype) for t in workload.tensors}
    loop_names: list[str] = []
    nests: list[Stmt] = []
    for t in workload.computes:
        nests.append(_nest_for(t, buffers, loop_names))
    params = tuple(buffers[id(t)] for t in (*workload.inputs, *workload.outputs))
    allocs = tuple(buffers[id(t)] for t in workload.intermediates)
    return Func(_func_name(workload), params, seq(*nests), allocs)


def _func_name(workload: Workload) -> str:
    return "tg_" + "".join(c if c.isalnum() else "_" for c in workload.op_name)


def _nest_for(t: Tensor, buffers: dict[int, Buffer], loop_names: list[str]) -> Stmt:
    op = t.op
    body_expr = op.body
    reduce_axes = body_expr.axes if isinstance(body_expr, Reduce) else ()
    axes = (*op.axes, *reduce_axes)
    block_vars = tuple(BlockVar(Var(f"v_{a.var.name}"), a.extent, a.kind) for a in axes)
    to_block_var = {a.var: bv.var for a, bv in zip(axes, block_vars)}

    def to_loop_ir(e: Expr) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, Var):
                return to_block_var.get(x)
            if isinstance(x, TensorRead):
                return BufferLoad(buffers[id(x.tensor)], x.indices)
            return None

        return rewrite(e, fn)

    out = buffers[id(t)]
    out_idx = tuple(bv.var for bv in block_vars[: len(op.axes)])
    if isinstance(body_expr, Reduce):
        init_value = body_expr.init if body_expr.init is not None else identity_of(body_expr.combiner, body_expr.dtype)
        init = BufferStore(out, out_idx, to_loop_ir(init_value))
        old = BufferLoad(out, out_idx)
        new = combine(body_expr.combiner, old, to_loop_ir(body_expr.source))
        if body_expr.condition is not None:
            new = Select(to_loop_ir(body_expr.condition), new, old)
        body: Stmt = BufferStore(out, out_idx, new)
    else:
        init = None
        body = BufferStore(out, out_idx, to_loop_ir(body_expr))

    loop_vars = []
    for a in axes:
        name = fresh_name(a.var.name, loop_names)
        loop_names.append(name)
        loop_vars.append(Var(name))
    stmt: Stmt = Block(t.name, block_vars, tuple(loop_vars), body, init)
    for v, a in reversed(list(zip(loop_vars, axes))):
        stmt = For(v, a.extent, "serial", stmt)
    return stmt
