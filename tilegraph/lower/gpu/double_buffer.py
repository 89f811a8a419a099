"""double_buffer: a reduction loop that refills shared tiles each iteration gets two copies of each
tile: while the threads compute on one, the next tile's global loads are already in flight (into
registers), and one barrier per iteration replaces two.

    for k in range(K):                          S: float32[2n]    stage: local registers
      barrier                                   S[0 + i] = G[f(0)]                     (prologue: tile 0)
      S[i] = G[f(k)]                ==>         barrier
      barrier                                   for k in range(K):
      compute(S[j])                               if k + 1 < K: stage = G[f(k + 1)]     (loads in flight)
                                                  compute(S[(k % 2) * n + j])
                                                  if k + 1 < K: S[((k + 1) % 2) * n + i] = stage
                                                  barrier

Why one barrier is enough: iteration k writes copy (k+1) % 2, which iteration k-1 read; the barrier
ending k-1 has every thread past that compute. The barrier ending k makes tile k+1 visible to all.

Applies to a serial loop whose body is exactly [barrier, copies into shared buffers from global
memory (each maybe under an `if`), barrier, the rest], where the rest reads but never writes those
buffers and nothing outside the loop touches them, when the doubled tiles fit the target's shared
memory. The copies keep their guards (evaluated for k + 1) and their vector width.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_loads, rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import Allocate, Barrier, Buffer, BufferStore, For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.loop.visit import loads_under, walk_stmts
from tilegraph.schedule.primitives.nest import fresh_buffer_name
from tilegraph.te.expr import BinOp, BufferLoad, Const, Expr, Ramp, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, walk

DEFAULT_SHARED_BYTES = 48 << 10


def run(func: Func, target: object = None) -> Func:
    limit = int(getattr(target, "shared_memory_bytes", None) or DEFAULT_SHARED_BYTES)
    for lp in [x for x in walk_stmts(func.body) if isinstance(x, For)]:
        plan = _plan(func, lp, limit)
        if plan is not None:
            func = _apply(func, lp, plan)
    return func


def _copy_store(s: Stmt) -> tuple[BufferStore, Expr | None] | None:
    """A copy into shared memory from global memory: (store, its guard or None)."""
    guard = None
    if isinstance(s, IfThenElse) and s.else_body is None:
        guard, s = s.cond, s.then_body
    if not isinstance(s, BufferStore) or s.buffer.scope != "shared":
        return None
    if any(x.buffer.scope != "global" for x in walk(s.value) if isinstance(x, BufferLoad)):
        return None
    if any(isinstance(x, BufferLoad) and x.buffer.scope != "global" for i in s.indices for x in walk(i)):
        return None
    return s, guard


def _plan(func: Func, lp: For, limit: int) -> tuple[list[tuple[BufferStore, Expr | None]], list[Stmt]] | None:
    if lp.kind != "serial" or lp.extent < 2 or not isinstance(lp.body, Seq):
        return None
    stmts = list(lp.body.stmts)
    if len(stmts) < 4 or not isinstance(stmts[0], Barrier):
        return None
    second = next((i for i in range(1, len(stmts)) if isinstance(stmts[i], Barrier)), None)
    if second is None or second < 2 or second == len(stmts) - 1:
        return None
    copies = [_copy_store(s) for s in stmts[1:second]]
    if not all(copies):
        return None
    rest = stmts[second + 1:]
    names = {c[0].buffer.name for c in copies}  # type: ignore[index]
    if any(isinstance(x, Barrier) for s in rest for x in walk_stmts(s)):
        return None
    if any(isinstance(x, BufferStore) and x.buffer.name in names for s in rest for x in walk_stmts(s)):
        return None
    inside = sum(_uses(s, names) for s in stmts)
    if _uses(func.body, names) != inside:  # touched outside the loop
        return None
    allocs = {x.buffer.name: x.buffer for x in walk_stmts(func.body) if isinstance(x, Allocate) and x.buffer.scope == "shared"}
    if not names <= set(allocs):
        return None
    used = sum(b.size * b.dtype.bits // 8 for b in allocs.values())
    extra = sum(allocs[n].size * allocs[n].dtype.bits // 8 for n in names)
    if used + extra > limit:
        return None
    return copies, rest  # type: ignore[return-value]


def _uses(s: Stmt, names: set[str]) -> int:
    count = sum(1 for x in walk_stmts(s) if isinstance(x, BufferStore) and x.buffer.name in names)
    return count + sum(1 for x in loads_under(s) if x.buffer.name in names)


def _apply(func: Func, lp: For, plan: tuple[list[tuple[BufferStore, Expr | None]], list[Stmt]]) -> Func:
    copies, rest = plan
    allocs = {x.buffer.name: x.buffer for x in walk_stmts(func.body) if isinstance(x, Allocate) and x.buffer.scope == "shared"}
    names = {store.buffer.name for store, _ in copies}
    doubled = {n: Buffer(n, (2 * allocs[n].size,), allocs[n].dtype, "shared") for n in names}
    size = {n: allocs[n].size for n in names}
    k = lp.var
    nxt = simplify(k + Const(1))
    has_next = nxt.lt(lp.extent)

    lanes = [_lanes(store) for store, _ in copies]
    stage = Buffer(fresh_buffer_name(func, f"{lp.var.name}_stage"), (max(1, sum(lanes)),), copies[0][0].buffer.dtype, "local")
    prologue: list[Stmt] = []
    loads: list[Stmt] = []
    stores: list[Stmt] = []
    slot = 0
    for (store, guard), width in zip(copies, lanes):
        name = store.buffer.name
        at0 = _offset(store.indices[0], Const(0))
        prologue.append(_guarded(substitute_stmt(BufferStore(doubled[name], (at0,), store.value), {k: Const(0)}),
                                 _sub(guard, {k: Const(0)})))
        where = Ramp(Const(slot), 1, width) if width > 1 else Const(slot)
        value_next = _sub(store.value, {k: nxt})
        guard_next = _and(has_next, _sub(guard, {k: nxt}))
        loads.append(_guarded(BufferStore(stage, (where,), value_next), guard_next))
        dst = _offset(store.indices[0], BinOp("floormod", nxt, Const(2)) * Const(size[name]))
        stores.append(_guarded(BufferStore(doubled[name], (dst,), BufferLoad(stage, (where,))), guard_next))
        slot += width

    current = BinOp("floormod", k, Const(2))

    def on_load(x: BufferLoad) -> Expr | None:
        if x.buffer.name in names:
            return BufferLoad(doubled[x.buffer.name], (_offset(x.indices[0], current * Const(size[x.buffer.name])),))
        return None

    def retarget(s: Stmt) -> Stmt | None:
        if isinstance(s, BufferStore):
            return BufferStore(s.buffer, tuple(rewrite_loads(i, on_load) for i in s.indices), rewrite_loads(s.value, on_load))
        if isinstance(s, IfThenElse):
            return IfThenElse(rewrite_loads(s.cond, on_load), rewrite_stmt(s.then_body, retarget),
                              rewrite_stmt(s.else_body, retarget) if s.else_body is not None else None)
        return None

    computed = [rewrite_stmt(s, retarget) for s in rest]
    body = Allocate(stage, seq(*loads, *computed, *stores, Barrier("shared")))
    new_loop = replace(lp, body=body)
    replacement = seq(*prologue, Barrier("shared"), new_loop)

    def on_stmt(s: Stmt) -> Stmt | None:
        if s is lp:
            return replacement
        if isinstance(s, Allocate) and s.buffer.name in names:
            return Allocate(doubled[s.buffer.name], s.body)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


def _lanes(store: BufferStore) -> int:
    index = store.indices[0]
    return index.lanes if isinstance(index, Ramp) else 1


def _offset(index: Expr, delta: Expr) -> Expr:
    if isinstance(index, Ramp):
        return Ramp(simplify(index.base + delta), index.stride, index.lanes)
    return simplify(index + delta)


def _sub(e: Expr | None, mapping: dict[Var, Expr]) -> Expr | None:
    return None if e is None else simplify(substitute(e, mapping))


def _and(a: Expr, b: Expr | None) -> Expr:
    return a if b is None else BinOp("and", a, b)


def _guarded(s: Stmt, guard: Expr | None) -> Stmt:
    return s if guard is None else IfThenElse(guard, s)


__all__ = ["run"]

