"""Workload -> the naive loop nest: one loop per axis, one block per compute tensor.

    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k))
becomes
    for i in range(M):
      for j in range(N):
        for k in range(K):
          block C(v_i=i, v_j=j, v_k=k; v_i, v_j spatial, v_k reduce):
            init: C[v_i, v_j] = 0
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]

Run-time dims (te/dims.py) become loads of the workload's dims input, and an axis with a run-time
bound keeps its static extent (the bound's upper limit). A reduction axis's bound guards its block;
a spatial axis's bound guards it only where an index depends on a dim or on data (elsewhere the
instances past the bound compute unspecified elements within storage, and no guard slows the
ones before it). With M = te.dim("m", 64) and K = te.dim("k", 32) in a matmul:

    for i in range(64):
      for j in range(N):
        for k in range(32):
          block C(v_i=i, v_j=j, v_k=k; where k < max(min(tg_dims[0], 32), 1)): ...

Every schedule primitive keeps a block's predicate, so a scheduled kernel sums exactly over the
instances below the bounds; its loops never run past the storage, and each dim's value is clamped
into its range, whatever the dims input holds.
"""

from __future__ import annotations

from tilegraph.loop.ir import TRUE, Block, BlockVar, Buffer, BufferStore, For, Func, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.te.dims import Dim
from tilegraph.te.expr import (
    BufferLoad,
    Const,
    Expr,
    Reduce,
    Select,
    TensorRead,
    Var,
    all_of,
    combine,
    identity_of,
    max_,
    min_,
)
from tilegraph.te.tensor import Tensor
from tilegraph.te.visit import rewrite, walk
from tilegraph.te.workload import Workload


def workload_to_func(workload: Workload) -> Func:
    """The unscheduled loop nest of a workload (the starting point of every schedule)."""
    buffers = {id(t): Buffer(t.name, t.shape, t.dtype) for t in workload.tensors}
    dims_input = workload.dims_input
    # each value clamped into its range: no dims array, however wrong, makes the kernel index
    # outside its storage (callers check the values first: te.dims.check_values)
    dim_values: dict[Dim, Expr] = {
        d: max_(min_(BufferLoad(buffers[id(dims_input)], (Const(i),)), Const(d.upper)), Const(d.lower))
        for i, d in enumerate(workload.dims)}
    loop_names: list[str] = []
    nests: list[Stmt] = []
    for t in workload.computes:
        nests.append(_nest_for(t, buffers, loop_names, dim_values))
    params = tuple(buffers[id(t)] for t in (*workload.inputs, *workload.outputs))
    allocs = tuple(buffers[id(t)] for t in workload.intermediates)
    return Func(_func_name(workload), params, seq(*nests), allocs)


def _func_name(workload: Workload) -> str:
    return "tg_" + "".join(c if c.isalnum() else "_" for c in workload.op_name)


def _indexes_at_run_time(body: Expr) -> bool:
    """Whether an index of `body` depends on a dim or on data (a gather). Only then does an
    instance past a spatial axis's run-time bound need its guard: its other indices are those of
    the same computation at the upper bounds, within storage. A reduction's bound always guards
    (the sum over [0, n) must not take the elements past n)."""
    for e in walk(body):
        if isinstance(e, TensorRead) and any(isinstance(x, (Dim, TensorRead)) for i in e.indices for x in walk(i)):
            return True
    return False


def _nest_for(t: Tensor, buffers: dict[int, Buffer], loop_names: list[str], dim_values: dict[Dim, Expr]) -> Stmt:
    op = t.op
    body_expr = op.body
    reduce_axes = body_expr.axes if isinstance(body_expr, Reduce) else ()
    axes = (*op.axes, *reduce_axes)
    block_vars = tuple(BlockVar(Var(f"v_{a.var.name}"), a.extent, a.kind) for a in axes)
    to_block_var = {a.var: bv.var for a, bv in zip(axes, block_vars)}

    def to_loop_ir(e: Expr) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, Dim):
                return dim_values[x]
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
    # a predicate is written in the enclosing loops' variables (the block binds its own inside)
    guarded = [a for a in axes if a.bound is not None and (a.kind == "reduce" or _indexes_at_run_time(body_expr))]
    guards = [v.lt(to_loop_ir(a.bound)) for a, v in zip(axes, loop_vars) if a in guarded]
    predicate = all_of(*guards) if guards else TRUE
    stmt: Stmt = Block(t.name, block_vars, tuple(loop_vars), body, init, predicate)
    for v, a in reversed(list(zip(loop_vars, axes))):
        stmt = For(v, a.extent, "serial", stmt)
    return stmt
