"""register_accumulators: a thread's tile of an output that it accumulates in place (global memory)
is held in registers for the whole thread-loop body: a local array indexed by constants (which the
device compiler keeps in registers), loaded once at the start and stored once at the end.

    for tx in range(8) threadIdx.x:                      for tx in range(8) threadIdx.x:
      for k in range(16):                                  allocate C_reg: float32[2] scope=local
        if k == 0: C[bx*64 + tx*2] = 0.0f                    C_reg[0] = C[bx*64 + tx*2]
        C[bx*64 + tx*2] = C[bx*64 + tx*2] + ...     ==>      C_reg[1] = C[bx*64 + tx*2 + 8]
        if k == 0: C[bx*64 + tx*2 + 8] = 0.0f                for k in range(16):
        C[bx*64 + tx*2 + 8] = C[bx*64 + tx*2 + 8] + ...        if k == 0: C_reg[0] = 0.0f
                                                               C_reg[0] = C_reg[0] + ...
                                                               if k == 0: C_reg[1] = 0.0f
                                                               C_reg[1] = C_reg[1] + ...
                                                             C[bx*64 + tx*2] = C_reg[0]
                                                             C[bx*64 + tx*2 + 8] = C_reg[1]

This is how a strided virtual-thread tile (Gensor 1.7: v chunks of c elements, t*c apart) stays in
registers: its region has no contiguous box a cache_write could copy back, but after expand_unroll
every access is `base + constant` with one `base` per thread, so the tile is a set of constants.
It also keeps serial per-thread reductions (one output element per thread) in a register.

Legal, per innermost thread loop and global buffer C (else the loop is left alone):
- C is accessed inside a loop of the body (else each element is touched once: nothing to gain);
- every access to C in the promoted body is `base + constant` (one flattened index), with the same
  `base`, which no loop inside the body changes; at most MAX_REGISTERS distinct constants;
- no condition inside the body that guards an access mentions the thread or a variable of `base`
  (a bounds guard would make the unconditional load/store unsafe; a guard wrapping the whole body
  is kept around the promoted body instead), and the accessed range is inside C by bounds analysis;
- no two threads of a block touch the same element (checked by enumerating the thread indices),
  so no other thread can observe the register copy while the body runs.
The load at the start keeps elements that are read before written; the store at the end writes
every element the body may write (an element not written keeps the value it was loaded with).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tilegraph.loop.edit import rewrite_loads, rewrite_stmt, stmt_with_children
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.visit import stmt_children, stmt_exprs, walk_stmts
from tilegraph.lower.gpu.common import THREAD_IDX_KINDS
from tilegraph.schedule.primitives.nest import fresh_buffer_name
from tilegraph.te.arith import Terms, affine, affine_bounds
from tilegraph.te.expr import BufferLoad, Const, Expr, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import free_vars, substitute, walk

MAX_REGISTERS = 64
MAX_THREADS_CHECKED = 1024


def run(func: Func, target: object = None) -> Func:
    state = _Names(func)

    def on_stmt(s: Stmt, outer: tuple[For, ...]) -> Stmt | None:
        if isinstance(s, For) and s.kind in THREAD_IDX_KINDS and not _is_thread_loop(s.body):
            threads = tuple(lp for lp in (*outer, s) if lp.kind in THREAD_IDX_KINDS)
            return replace(s, body=_promote_body(s.body, (*outer, s), threads, state))
        return None

    return replace(func, body=_rewrite_with_loops(func.body, (), on_stmt))


@dataclass
class _Names:
    func: Func
    taken: set[str] = field(default_factory=set)

    def fresh(self, base: str) -> str:
        name = fresh_buffer_name(self.func, base)
        k = 0
        while name in self.taken:
            k += 1
            name = fresh_buffer_name(self.func, f"{base}{k}")
        self.taken.add(name)
        return name


def _is_thread_loop(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind in THREAD_IDX_KINDS


def _rewrite_with_loops(s: Stmt, outer: tuple[For, ...], fn: Callable[[Stmt, tuple[For, ...]], Stmt | None]) -> Stmt:
    """rewrite_stmt that also passes the loops enclosing each statement."""
    new = fn(s, outer)
    if new is not None:
        return new
    inner = (*outer, s) if isinstance(s, For) else outer
    kids = stmt_children(s)
    if not kids:
        return s
    return stmt_with_children(s, tuple(_rewrite_with_loops(k, inner, fn) for k in kids))


def _promote_body(body: Stmt, loops: tuple[For, ...], threads: tuple[For, ...], names: _Names) -> Stmt:
    if isinstance(body, IfThenElse) and body.else_body is None:  # a guard around the whole body stays outside
        return replace(body, then_body=_promote_body(body.then_body, loops, threads, names))
    stored = sorted({x.buffer.name: x.buffer for x in walk_stmts(body)
                     if isinstance(x, BufferStore) and x.buffer.scope == "global"}.items())
    for _, buf in stored:
        plan = _plan(body, buf, loops, threads)
        if plan is not None:
            body = _apply(body, buf, plan, names.fresh(f"{buf.name}_reg"))
    return body


@dataclass(frozen=True)
class _Plan:
    base: Terms
    offsets: tuple[int, ...]          # distinct constants, sorted
    written: frozenset[int]


def _plan(body: Stmt, buf: Buffer, loops: tuple[For, ...], threads: tuple[For, ...]) -> _Plan | None:
    if buf.ndim != 1:
        return None
    inner_vars = {x.var for x in walk_stmts(body) if isinstance(x, For)}
    forms: list[tuple[Terms, int, bool]] = []
    for index, is_store, conds in _accesses(body, buf.name):
        terms, const = affine(simplify(index), through_casts=True)
        atoms_vars = {v for a in terms for v in free_vars(a)}
        if any(isinstance(x, BufferLoad) for a in terms for x in walk(a)) or atoms_vars & inner_vars:
            return None
        guarded = {v for c in conds for v in free_vars(c)}
        if guarded - inner_vars:  # a guard on the position: the unconditional copies could go out of bounds
            return None
        forms.append((terms, const, is_store))
    if not forms or not any(is_store for _, _, is_store in forms) or not _accessed_in_a_loop(body, buf.name):
        return None  # nothing to gain: each element is touched once (e.g. a cache_write's write-back)
    base = forms[0][0]
    if any(terms != base for terms, _, _ in forms):
        return None
    offsets = tuple(sorted({c for _, c, _ in forms}))
    if len(offsets) > MAX_REGISTERS:
        return None
    known = {lp.var.name: (0, lp.extent - 1) for lp in loops}
    bounds = affine_bounds(base, 0, known)
    if bounds is None or bounds[0] + offsets[0] < 0 or bounds[1] + offsets[-1] >= buf.shape[0]:
        return None
    if not _threads_disjoint(base, offsets, loops, threads):
        return None
    return _Plan(base, offsets, frozenset(c for _, c, s in forms if s))


def _accessed_in_a_loop(body: Stmt, name: str) -> bool:
    return any(isinstance(x, For) and _accesses(x.body, name) for x in walk_stmts(body))


def _accesses(s: Stmt, name: str, conds: tuple[Expr, ...] = ()) -> list[tuple[Expr, bool, tuple[Expr, ...]]]:
    """(index, is_store, conditions guarding it inside `s`) of every access to `name`."""
    out: list[tuple[Expr, bool, tuple[Expr, ...]]] = []
    if isinstance(s, IfThenElse):
        out += [(i, st, c) for e in stmt_exprs(s) for i, st, c in _loads(e, name, conds)]
        out += _accesses(s.then_body, name, (*conds, s.cond))
        if s.else_body is not None:
            out += _accesses(s.else_body, name, (*conds, s.cond))
        return out
    if isinstance(s, BufferStore):
        for e in (*s.indices, s.value):
            out += _loads(e, name, conds)
        if s.buffer.name == name:
            out.append((s.indices[0] if len(s.indices) == 1 else Const(-1), True, conds))
        return out
    for e in stmt_exprs(s):
        out += _loads(e, name, conds)
    for k in stmt_children(s):
        out += _accesses(k, name, conds)
    return out


def _loads(e: Expr, name: str, conds: tuple[Expr, ...]) -> list[tuple[Expr, bool, tuple[Expr, ...]]]:
    return [(x.indices[0] if len(x.indices) == 1 else Const(-1), False, conds)
            for x in walk(e) if isinstance(x, BufferLoad) and x.buffer.name == name]


def _threads_disjoint(base: Terms, offsets: tuple[int, ...], loops: tuple[For, ...], threads: tuple[For, ...]) -> bool:
    """No element is touched by two threads of one block, at the first and the last value of every
    other enclosing loop."""
    count = 1
    for lp in threads:
        count *= lp.extent
    if count > MAX_THREADS_CHECKED:
        return False
    others = [lp for lp in loops if lp not in threads]
    base_expr = _expr(base)
    for pick in (0, -1):
        fixed = {lp.var: Const(0 if pick == 0 else lp.extent - 1) for lp in others}
        seen: set[int] = set()
        for combo in itertools.product(*(range(lp.extent) for lp in threads)):
            point = {**fixed, **{lp.var: Const(v) for lp, v in zip(threads, combo)}}
            value = simplify(substitute(base_expr, point))
            if not isinstance(value, Const):
                return False
            mine = {value.value + o for o in offsets}
            if seen & mine:
                return False
            seen |= mine
    return True


def _expr(terms: Terms) -> Expr:
    out: Expr = Const(0)
    for atom, c in terms.items():
        out = out + atom * Const(c)
    return simplify(out)


def _apply(body: Stmt, buf: Buffer, plan: _Plan, name: str) -> Stmt:
    reg = Buffer(name, (len(plan.offsets),), buf.dtype, "local")
    slot = {o: k for k, o in enumerate(plan.offsets)}
    base = _expr(plan.base)

    def to_reg(index: Expr) -> Expr:
        _, const = affine(simplify(index), through_casts=True)
        return Const(slot[const])

    def on_load(x: BufferLoad) -> Expr | None:
        return BufferLoad(reg, (to_reg(x.indices[0]),)) if x.buffer.name == buf.name else None

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, BufferStore):
            value = rewrite_loads(s.value, on_load)
            indices = tuple(rewrite_loads(i, on_load) for i in s.indices)
            if s.buffer.name == buf.name:
                return BufferStore(reg, (to_reg(indices[0]),), value)
            return BufferStore(s.buffer, indices, value)
        if isinstance(s, IfThenElse):
            inner = rewrite_stmt(s.then_body, on_stmt)
            other = rewrite_stmt(s.else_body, on_stmt) if s.else_body is not None else None
            return IfThenElse(rewrite_loads(s.cond, on_load), inner, other)
        return None

    def at(o: int) -> tuple[Expr, ...]:
        return (simplify(base + Const(o)),)

    promoted = rewrite_stmt(body, on_stmt)
    first = _read_before_written(promoted, reg.name, {}, set())
    loads = [BufferStore(reg, (Const(k),), BufferLoad(buf, at(o))) for k, o in enumerate(plan.offsets) if k in first]
    stores = [BufferStore(buf, at(o), BufferLoad(reg, (Const(k),))) for k, o in enumerate(plan.offsets)
              if o in plan.written]
    return Allocate(reg, Seq((*loads, promoted, *stores)))


def _read_before_written(s: Stmt, reg: str, first: dict[Var, Expr], written: set[int]) -> set[int]:
    """Slots of `reg` that may be read before this thread writes them: the first iteration of
    every loop is followed in program order (every loop runs at least once); a store counts as
    done only where its guards are true in that first iteration (e.g. `if k == 0: C_reg[0] = 0`).
    `written` grows as stores are passed."""
    early: set[int] = set()
    if isinstance(s, BufferStore):
        early |= {k for e in (*s.indices, s.value) for k in _slots_read(e, reg)} - written
        if s.buffer.name == reg:
            written.add(s.indices[0].value)  # type: ignore[attr-defined]
        return early
    if isinstance(s, IfThenElse):
        early |= _slots_read(s.cond, reg) - written
        taken = simplify(substitute(s.cond, first))
        if isinstance(taken, Const):
            branch = s.then_body if taken.value else s.else_body
            return early | (_read_before_written(branch, reg, first, written) if branch is not None else set())
        for branch in (s.then_body, s.else_body):  # either may run: its stores are not certain
            if branch is not None:
                early |= _read_before_written(branch, reg, first, set(written))
        return early
    if isinstance(s, For):
        return _read_before_written(s.body, reg, {**first, s.var: Const(0)}, written)
    for e in stmt_exprs(s):
        early |= _slots_read(e, reg) - written
    for k in stmt_children(s):
        early |= _read_before_written(k, reg, first, written)
    return early


def _slots_read(e: Expr, reg: str) -> set[int]:
    return {x.indices[0].value for x in walk(e) if isinstance(x, BufferLoad) and x.buffer.name == reg}  # type: ignore[attr-defined]


__all__ = ["MAX_REGISTERS", "run"]
