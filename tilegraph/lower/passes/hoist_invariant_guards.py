"""hoist_invariant_guards: one test of a condition outside a loop instead of one per statement
and iteration inside it (loop unswitching for the guards a non-dividing tile leaves).

Adjacent statements under the same condition merge, and a serial loop whose whole body is one
guarded statement whose condition does not involve the loop's variable moves inside the guard:

    for rc in range(64):                              if (h_0 * 4 + h_1 < 14):
      if (h_0 * 4 + h_1 < 14): acc_0 += x[...] * w[...]     for rc in range(64):
      if (h_0 * 4 + h_1 < 14): acc_1 += x[...] * w[...]  ==>     acc_0 += x[...] * w[...]
                                                              acc_1 += x[...] * w[...]

gcc unswitches such loops only while their body is small (`max-unswitch-insns`): an unrolled
register tile of 16 accumulators stays guarded statement by statement, which ran grouped
convolution (GRP-3, 14 rows tiled by 4) at a third of its speed. Conditions that read memory
are never moved (a loop of zero iterations must not read), but for the run-time dims' input
(te/dims.py: always there to read); parallel or vector loops keep their bodies: only serial and
unrolled loops are rewritten. Meaning is unchanged: a condition free
of the loop's variable has the same value in every iteration, and testing it once before a loop
that does nothing else is the same as testing it in each.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.te.dims import DIMS_INPUT
from tilegraph.te.expr import BufferLoad
from tilegraph.te.visit import uses_var, walk

MOVABLE_KINDS = ("serial", "unrolled")


def run(func: Func, target: object) -> Func:
    return replace(func, body=rewrite_stmt(func.body, _hoist))


def _hoist(s: Stmt) -> Stmt | None:
    if isinstance(s, Seq):
        merged = _merge_adjacent(s.stmts)
        return None if len(merged) == len(s.stmts) else seq(*merged)
    if isinstance(s, For) and s.kind in MOVABLE_KINDS:
        body = s.body
        if isinstance(body, Seq):
            merged = _merge_adjacent(body.stmts)
            body = merged[0] if len(merged) == 1 else Seq(merged)
        if _plain_guard(body) and not uses_var(body.cond, s.var):
            return IfThenElse(body.cond, replace(s, body=body.then_body))
        return None if body is s.body else replace(s, body=body)
    return None


def _merge_adjacent(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Runs of statements guarded by one condition become one guarded sequence."""
    out: list[Stmt] = []
    for stmt in stmts:
        last = out[-1] if out else None
        if _plain_guard(stmt) and _plain_guard(last) and last.cond == stmt.cond:
            out[-1] = IfThenElse(stmt.cond, seq(last.then_body, stmt.then_body))
        else:
            out.append(stmt)
    return tuple(out)


def _plain_guard(s: Stmt | None) -> bool:
    """An `if` without else whose condition reads no memory but the run-time dims (te/dims.py:
    a kernel's dims input is always there to read)."""
    return (isinstance(s, IfThenElse) and s.else_body is None
            and not any(isinstance(e, BufferLoad) and e.buffer.name != DIMS_INPUT for e in walk(s.cond)))


__all__ = ["run"]
