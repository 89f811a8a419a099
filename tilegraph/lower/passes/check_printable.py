"""check_printable: the last pass; refuses (LoweringError) anything the C printer cannot print,
so printing never fails. It changes nothing:

    for i in range(4) threadIdx.x: ...   ==>   LoweringError: loop i is bound to threadIdx.x ...
"""

from __future__ import annotations

from tilegraph import dtype as dt
from tilegraph.errors import LoweringError
from tilegraph.loop.ir import GPU_LOOP_KINDS, Allocate, Barrier, Block, Buffer, BufferStore, For, Func, IfThenElse
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.lower_vectorize import VECTOR_TYPES, VECTOR_VALUE_TYPES, VECTOR_WIDTHS
from tilegraph.te.expr import Broadcast, BufferLoad, Expr, Ramp, Reduce, TensorRead
from tilegraph.te.visit import children


def run(func: Func, target: object) -> Func:
    for b in func.buffers:
        _check_buffer(b, func)
    for s in walk_stmts(func.body):
        if isinstance(s, Block):
            raise LoweringError(f"block {s.name} survived lowering (internal error: lower_blocks did not run)")
        if isinstance(s, Barrier):
            raise LoweringError("a barrier cannot be lowered for a CPU target")
        if isinstance(s, For) and s.kind in GPU_LOOP_KINDS:
            raise LoweringError(f"loop {s.var.name} is bound to {s.kind}, which a CPU target cannot run")
        if isinstance(s, Allocate):
            _check_buffer(s.buffer, func)
        if isinstance(s, BufferStore):
            _check_buffer(s.buffer, func)
            for i in s.indices:
                _check_index(i, s.buffer, store=True)
            _check_value(s.value)
        if isinstance(s, IfThenElse):
            _check_value(s.cond)
    return func


def _check_buffer(b: Buffer, func: Func) -> None:
    if b.ndim != 1:
        raise LoweringError(f"buffer {b.name} is still {b.ndim}-D after flatten_buffers (internal error)")
    if b.dtype.lanes > 1:
        _check_vector_type(b.dtype, f"buffer {b.name}", VECTOR_TYPES)


def _check_vector_type(d: dt.DType, what: str, types: tuple[dt.DType, ...] = VECTOR_VALUE_TYPES) -> None:
    if d.lanes not in VECTOR_WIDTHS or d.scalar not in types:
        names = "/".join(t.name for t in types)
        raise LoweringError(f"{what}: vector type {d} is not printable (lanes {VECTOR_WIDTHS} of {names})")


def _check_index(i: Expr, b: Buffer, store: bool) -> None:
    if isinstance(i, Ramp):
        if store and i.stride != 1:
            raise LoweringError(f"store to {b.name} with stride {i.stride}: only contiguous vector stores exist")
        _check_vector_type(b.dtype.with_lanes(i.lanes), f"access to {b.name}")
        _check_value(i.base)
    else:
        _check_value(i)


def _check_value(e: Expr) -> None:
    if isinstance(e, (TensorRead, Reduce)):
        raise LoweringError(f"{type(e).__name__} survived lowering; tensor expressions must be lowered to loads")
    if isinstance(e, Ramp):
        raise LoweringError("a ramp used as a value (a vector of indices) is not printable; vectorisation should fall back")
    if isinstance(e, Broadcast):
        _check_vector_type(e.dtype, "broadcast")
    if isinstance(e, BufferLoad):
        for i in e.indices:
            _check_index(i, e.buffer, store=False)
        return
    for k in children(e):
        _check_value(k)
