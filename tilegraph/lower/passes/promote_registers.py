"""promote_registers: a local buffer touched only by whole, aligned vectors at constant offsets
becomes a set of vector registers, so the C compiler keeps it out of memory.

    allocate acc: float32[32] scope=local          allocate acc: float32x16[2] scope=local
      acc[ramp(0, 1, 16)] = broadcast(0.0f, 16)  ==>   acc[0] = broadcast(0.0f, 16)
      acc[ramp(16, 1, 16)] = ...                       acc[1] = ...

The printer declares such a buffer as separate vector variables (`v16sf acc_0, acc_1;`).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import map_exprs, rewrite_loads, rewrite_stmt
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, Func, Stmt, TileProduct
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.lower.passes.lower_vectorize import VECTOR_TYPES
from tilegraph.te.expr import BufferLoad, Const, Expr, Ramp
from tilegraph.te.visit import walk

MAX_REGISTERS = 64


def run(func: Func, target: object) -> Func:
    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Allocate):
            lanes = _register_lanes(s)
            if lanes:
                return _promote(s, lanes)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


def _accesses(s: Allocate) -> list[tuple[Expr, ...]]:
    out: list[tuple[Expr, ...]] = []
    for x in walk_stmts(s.body):
        if isinstance(x, BufferStore) and x.buffer == s.buffer:
            out.append(x.indices)
        for e in stmt_exprs(x):
            out.extend(n.indices for n in walk(e) if isinstance(n, BufferLoad) and n.buffer == s.buffer)
    return out


def _register_lanes(s: Allocate) -> int:
    b = s.buffer
    if b.scope != "local" or b.dtype not in VECTOR_TYPES or b.ndim != 1:
        return 0
    accesses = _accesses(s)
    if not accesses or any(isinstance(x, TileProduct) and b in (x.acc, x.a, x.b) for x in walk_stmts(s.body)):
        return 0  # a matrix unit's tiles load and store it from memory (use_matrix_tiles)
    lanes = set()
    for idx in accesses:
        r = idx[0] if len(idx) == 1 else None
        if not (isinstance(r, Ramp) and r.stride == 1 and isinstance(r.base, Const) and r.base.value % r.lanes == 0):
            return 0
        lanes.add(r.lanes)
    (width,) = lanes if len(lanes) == 1 else (0,)
    if not width or b.size % width or b.size // width > MAX_REGISTERS:
        return 0
    return width


def _promote(s: Allocate, lanes: int) -> Allocate:
    old = s.buffer
    new = Buffer(old.name, (old.size // lanes,), old.dtype.with_lanes(lanes), old.scope)

    def slot(idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return (Const(idx[0].base.value // lanes),)  # type: ignore[attr-defined]

    def on_load(x: BufferLoad) -> Expr | None:
        return BufferLoad(new, slot(x.indices)) if x.buffer == old else None

    def on_stmt(x: Stmt) -> Stmt | None:
        if isinstance(x, BufferStore) and x.buffer == old:
            return BufferStore(new, slot(x.indices), x.value)
        return None

    body = map_exprs(s.body, lambda e: rewrite_loads(e, on_load))
    return Allocate(new, rewrite_stmt(body, on_stmt))
