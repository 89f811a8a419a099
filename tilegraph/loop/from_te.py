"""Workload -> the naive loop nest: one loop per axis, one block per compute tensor.

    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k))
becomes
    for i in range(M):
      for j in range(N):
        for k in range(K):
          block C(v_i=i, v_j=j, v_k=k; v_i, v_j spatial, v_k reduce):
            init: C[v_i, v_j] = 0
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]

Run-time dims (te/dims.py) become loads of the workload's dims input, each clamped into its
range, and an axis with a run-time bound keeps its static extent (the bound's upper limit) and
guards its block. With M = te.dims.dim("m", 64) in a matmul:

    for i in range(64):
      for j in range(N):
        for k in range(K):
          block C(v_i=i, v_j=j, v_k=k; where i < max(min(tg_dims[0], 64), 1)): ...

Every schedule primitive keeps a block's predicate, so a scheduled kernel runs exactly the
instances below the bounds (lowering may skip whole tiles past them, lower/passes/skip_past_dims.py,
and run the instances past a spatial bound where that is cheaper, relax_dims_guards.py); its loops
never run past the storage, whatever the dims input holds.
"""

from __future__ import annotations

from collections.abc import Callable

from tilegraph.loop.ir import TRUE, Block, BlockVar, Buffer, BufferStore, For, Func, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.te.dims import Dim, value_of
from tilegraph.te.expr import (
    BufferLoad,
    Const,
    Expr,
    IterVar,
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
from tilegraph.te.visit import rewrite
from tilegraph.te.workload import Workload

# Func attr: (tensor name, its run-time extent or None per dimension) for each tensor with run-time
# dims; lower/passes/skip_past_dims.py skips the instances that store past them
DIM_EXTENTS_ATTR = "dim_extents"


def workload_to_func(workload: Workload) -> Func:
    """The unscheduled loop nest of a workload (the starting point of every schedule)."""
    limits = workload.tuning_dims
    # a bucket's intermediates are sized by its loops (Workload.at: the arrays a caller passes keep
    # the range's storage, what stays inside the kernel need not), so a stage computed at another's
    # loop still covers its buffer's whole domain
    inner = {id(t) for t in workload.intermediates}
    buffers = {id(t): Buffer(t.name, _bucket_shape(t, limits) if id(t) in inner else t.shape, t.dtype)
               for t in workload.tensors}
    dims_input = workload.dims_input
    # each value clamped into its range, up to the bucket's upper bound (Workload.at): no dims
    # array, however wrong, makes the kernel index outside its storage or its loops (callers check
    # the values first: te.dims.check_values, runtime/kernel.py)
    dim_values: dict[Dim, Expr] = {
        d: max_(min_(BufferLoad(buffers[id(dims_input)], (Const(i),)), Const(limits[d.name])), Const(d.lower))
        for i, d in enumerate(workload.dims)}
    loop_names: list[str] = []
    nests: list[Stmt] = []
    for t in workload.computes:
        nests.append(_nest_for(t, buffers, loop_names, dim_values, workload.loop_extent))
    params = tuple(buffers[id(t)] for t in (*workload.inputs, *workload.outputs))
    allocs = tuple(buffers[id(t)] for t in workload.intermediates)
    # each tensor's run-time extents, for lowering's skipping (lower/passes/skip_past_dims.py)
    extents = tuple((t.name, tuple(None if b is None else _dim_expr(b, dim_values) for b in t.bounds))
                    for t in workload.tensors if t.bounds)
    attrs = ((DIM_EXTENTS_ATTR, extents),) if extents else ()
    return Func(_func_name(workload), params, seq(*nests), allocs, attrs)


def param_dim_extents(workload: Workload) -> tuple[tuple[str, tuple[Expr | None, ...]], ...]:
    """DIM_EXTENTS_ATTR's entries for the workload's inputs and outputs: what a kernel built
    otherwise than from this workload's own nest (a fused kernel: graph/fusion/compose.py) states
    about its parameters."""
    dims_input = workload.dims_input
    if dims_input is None:
        return ()
    limits = workload.tuning_dims
    buffer = Buffer(dims_input.name, dims_input.shape, dims_input.dtype)
    dim_values: dict[Dim, Expr] = {
        d: max_(min_(BufferLoad(buffer, (Const(i),)), Const(limits[d.name])), Const(d.lower))
        for i, d in enumerate(workload.dims)}
    return tuple((t.name, tuple(None if b is None else _dim_expr(b, dim_values) for b in t.bounds))
                 for t in (*workload.inputs, *workload.outputs) if t.bounds)


def _dim_expr(e: Expr, dim_values: dict[Dim, Expr]) -> Expr:
    return rewrite(e, lambda x: dim_values.get(x) if isinstance(x, Dim) else None)


def _func_name(workload: Workload) -> str:
    return "tg_" + "".join(c if c.isalnum() else "_" for c in workload.op_name)


def _bucket_shape(t: Tensor, limits: dict[str, int]) -> tuple[int, ...]:
    """A tensor's extents with its run-time ones at the bucket's upper bound."""
    bounds = t.bounds or (None,) * t.ndim
    return tuple(s if b is None else min(s, value_of(b, limits)) for s, b in zip(t.shape, bounds))


def _nest_for(t: Tensor, buffers: dict[int, Buffer], loop_names: list[str], dim_values: dict[Dim, Expr],
              loop_extent: Callable[[IterVar], int]) -> Stmt:
    op = t.op
    body_expr = op.body
    reduce_axes = body_expr.axes if isinstance(body_expr, Reduce) else ()
    axes = (*op.axes, *reduce_axes)
    block_vars = tuple(BlockVar(Var(f"v_{a.var.name}"), loop_extent(a), a.kind) for a in axes)
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
    guards = [v.lt(to_loop_ir(a.bound)) for a, v in zip(axes, loop_vars) if a.bound is not None]
    predicate = all_of(*guards) if guards else TRUE
    stmt: Stmt = Block(t.name, block_vars, tuple(loop_vars), body, init, predicate)
    for v, a in reversed(list(zip(loop_vars, axes))):
        stmt = For(v, loop_extent(a), "serial", stmt)
    return stmt
