"""check_printable: the last pass; refuses (LoweringError) anything the C printer cannot print,
so printing never fails. It changes nothing:

    for i in range(4) threadIdx.x: ...   ==>   LoweringError: loop i is bound to threadIdx.x ...
"""

from __future__ import annotations

from tilegraph import dtype as dt
from tilegraph.errors import LoweringError
from tilegraph.loop.ir import GPU_LOOP_KINDS, Allocate, Barrier, Block, Buffer, BufferStore, For, Func, IfThenElse
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.group_int8_products import DOT4
from tilegraph.lower.passes.lower_vectorize import VECTOR_TYPES, VECTOR_VALUE_TYPES, VECTOR_WIDTHS, WIDENED_LOADS
from tilegraph.te.expr import Broadcast, BufferLoad, Call, Cast, Expr, Ramp, Reduce, TensorRead
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
        if isinstance(s, BufferStore) and s.buffer.dtype in WIDENED_LOADS and isinstance(s.indices[0], Ramp):
            # a narrowing store (lower_vectorize): int32 lanes, each keeping its low 8 bits
            if s.indices[0].stride != 1 or not isinstance(s.value, Cast) or \
                    s.value.value.dtype.scalar != dt.int32:
                raise LoweringError(f"store to {s.buffer.name}: 8-bit lanes are stored contiguously from int32 lanes")
            _check_vector_type(dt.int32.with_lanes(s.indices[0].lanes), f"store to {s.buffer.name}")
            _check_value(s.indices[0].base)
            _check_value(s.value.value)
        elif isinstance(s, BufferStore):
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
    if isinstance(e, Cast) and isinstance(e.value, BufferLoad) and e.value.buffer.dtype in WIDENED_LOADS \
            and isinstance(e.value.indices[0], Ramp):  # a widening load (codegen/int8.py), a gather if strided
        if e.dtype.scalar not in VECTOR_TYPES:
            raise LoweringError(f"a load of {e.value.buffer.name} widened to {e.dtype}: 8-bit loads widen to int32 "
                                "or float32 vectors only")
        _check_vector_type(e.dtype.scalar.with_lanes(e.value.indices[0].lanes), f"widening load of {e.value.buffer.name}")
        _check_value(e.value.indices[0].base)
        return
    if isinstance(e, Call) and e.name == DOT4:  # A's bytes and B's rows are passed by address
        _check_vector_type(e.dtype, DOT4)
        for x in e.args[1:]:
            _check_value(x.indices[0].base if isinstance(x.indices[0], Ramp) else x.indices[0])  # type: ignore[attr-defined]
        _check_value(e.args[0])
        return
    for k in children(e):
        _check_value(k)
