"""flatten_buffers: every buffer becomes one-dimensional, indexed row-major over its storage
shape (shape + padding), so padded rows keep their stride.

    C: float32[10, 3] padding=[0, 1]             C: float32[40]
    C[i, j] = A[i, j] + B[j, i]          ==>     C[i * 4 + j] = A[i * 3 + j] + B[j * 10 + i]
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import map_exprs, rewrite_loads, rewrite_stmt
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, Func, Stmt
from tilegraph.te.expr import BufferLoad, Const, Expr
from tilegraph.te.simplify import simplify


def flat_buffer(b: Buffer) -> Buffer:
    """The 1-D buffer holding `b`'s storage."""
    if b.ndim == 1 and not b.padding:
        return b
    return Buffer(b.name, (b.size,), b.dtype, b.scope)


def flat_index(b: Buffer, indices: tuple[Expr, ...]) -> Expr:
    if len(indices) != b.ndim:
        raise ValueError(f"buffer {b.name} has {b.ndim} dimensions, indexed with {len(indices)}")
    out: Expr = Const(0)
    for idx, extent in zip(indices, b.storage_shape):
        out = out * Const(extent) + idx
    return simplify(out)


def run(func: Func, target: object) -> Func:
    def on_load(x: BufferLoad) -> Expr:
        return BufferLoad(flat_buffer(x.buffer), (flat_index(x.buffer, x.indices),))

    def on_expr(e: Expr) -> Expr:
        return rewrite_loads(e, on_load)

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, BufferStore):
            return BufferStore(flat_buffer(s.buffer), (flat_index(s.buffer, s.indices),), s.value)
        if isinstance(s, Allocate):
            return replace(s, buffer=flat_buffer(s.buffer))
        return None

    body = rewrite_stmt(map_exprs(func.body, on_expr), on_stmt)
    return replace(func, body=body, params=tuple(flat_buffer(b) for b in func.params),
                   allocs=tuple(flat_buffer(b) for b in func.allocs))
