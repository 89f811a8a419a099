"""vectorize_copies: four neighbouring scalar copies whose source and destination addresses are
both provably 16-byte aligned become one vector copy (float4: one load and one store instruction,
a quarter of the memory instructions, full 128-byte lines per 8 lanes).

    s[tx * 4] = a[bx * 64 + tx * 4]                     s[ramp(tx * 4, 1, 4)] = a[ramp(bx * 64 + tx * 4, 1, 4)]
    s[tx * 4 + 1] = a[bx * 64 + tx * 4 + 1]      ==>
    s[tx * 4 + 2] = a[bx * 64 + tx * 4 + 2]
    s[tx * 4 + 3] = a[bx * 64 + tx * 4 + 3]

Aligned means: the flattened index is a sum of terms whose coefficients are multiples of 4 plus a
constant multiple of 4, and buffers start 16-byte aligned (cudaMalloc/clCreateBuffer buffers;
shared arrays are declared __align__(16)). A padded shared tile whose row length is not a multiple
of 4 stays scalar (Gensor's GPU states offer padding 4 for exactly this). Only whole copies of
32-bit elements are vectorised: `dst[i] = src[j]` with nothing else in the value, the four either
unguarded or under one and the same condition (which then guards the vector copy).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import BufferStore, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.te.arith import Terms, affine
from tilegraph.te.expr import BufferLoad, Expr, Ramp
from tilegraph.te.simplify import simplify

LANES = 4


def run(func: Func, target: object = None) -> Func:
    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Seq):
            stmts = _vectorize_runs(list(s.stmts))
            return seq(*stmts) if len(stmts) != len(s.stmts) else None
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


def _guarded_copy(s: Stmt) -> tuple[Expr | None, tuple[BufferStore, BufferLoad]] | None:
    """(guard or None, the copy) of a copy statement, maybe under an `if` without else."""
    guard = None
    if isinstance(s, IfThenElse) and s.else_body is None:
        guard, s = s.cond, s.then_body
    copy = _copy(s)
    return None if copy is None else (guard, copy)


def _copy(s: Stmt) -> tuple[BufferStore, BufferLoad] | None:
    if (isinstance(s, BufferStore) and isinstance(s.value, BufferLoad) and len(s.indices) == 1
            and len(s.value.indices) == 1 and s.buffer.dtype.bits == 32 and s.buffer.dtype.lanes == 1
            and s.value.buffer.dtype == s.buffer.dtype and not isinstance(s.indices[0], Ramp)):
        return s, s.value
    return None


def _form(e: Expr) -> tuple[Terms, int]:
    return affine(simplify(e), through_casts=True)


def _aligned(terms: Terms, const: int) -> bool:
    return const % LANES == 0 and all(c % LANES == 0 for c in terms.values())


def _vectorize_runs(stmts: list[Stmt]) -> list[Stmt]:
    out: list[Stmt] = []
    i = 0
    while i < len(stmts):
        group = [_guarded_copy(s) for s in stmts[i:i + LANES]]
        vector = None
        if len(group) == LANES and all(group) and len({g[0] for g in group}) == 1:  # type: ignore[index]
            vector = _vector_copy([g[1] for g in group])  # type: ignore[index]
        if vector is not None:
            guard = group[0][0]  # type: ignore[index]
            out.append(vector if guard is None else IfThenElse(guard, vector))
            i += LANES
        else:
            out.append(stmts[i])
            i += 1
    return out


def _vector_copy(group: list) -> Stmt | None:  # noqa: ANN001 (list of (store, load) pairs)
    first_store, first_load = group[0]
    st_terms, st_const = _form(first_store.indices[0])
    ld_terms, ld_const = _form(first_load.indices[0])
    if not (_aligned(st_terms, st_const) and _aligned(ld_terms, ld_const)):
        return None
    for k, (store, load) in enumerate(group):
        if store.buffer != first_store.buffer or load.buffer != first_load.buffer:
            return None
        if _form(store.indices[0]) != (st_terms, st_const + k) or _form(load.indices[0]) != (ld_terms, ld_const + k):
            return None
    if first_store.buffer.name == first_load.buffer.name:
        return None  # an overlapping copy within one buffer keeps its element order
    return BufferStore(first_store.buffer, (Ramp(first_store.indices[0], 1, LANES),),
                       BufferLoad(first_load.buffer, (Ramp(first_load.indices[0], 1, LANES),)))


__all__ = ["run"]
