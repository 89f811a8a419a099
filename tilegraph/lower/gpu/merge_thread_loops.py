"""merge_thread_loops: neighbouring loops bound to the same thread axis with the same extent become
one loop (each thread runs the parts in order), and a non-shared buffer allocated around a thread
loop that holds all its accesses moves inside it (one copy per thread, as the printers declare it).

    for ty in range(4) threadIdx.y:                       for ty in range(4) threadIdx.y:
      allocate m: float32[1]                                for tx in range(32) threadIdx.x:
        for tx in range(32) threadIdx.x:       ==>            allocate m: float32[1]
          A(tx)                                                 A(tx)
        for o in range(1):                                      B(tx, 0)
          for tx_1 in range(32) threadIdx.x:
            B(tx_1, o)

(A serial loop of one iteration around a thread loop, as compute_at leaves for a row, is dropped
first, its variable set to 0.)

Row kernels (softmax, layer norm) schedule each stage as its own thread loop under the row's
loop; merged, the stages run back to back in every thread and the thread loops nest directly.
Where one part writes a shared or global buffer the other touches, a barrier separates them, as
the separate loops did (all threads finished the first before any started the second).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import Allocate, Barrier, For, Func, Seq, Stmt, seq
from tilegraph.lower.gpu.common import THREAD_IDX_KINDS, accesses_in_scope
from tilegraph.te.expr import Const


def run(func: Func, target: object = None) -> Func:
    return replace(func, body=rewrite_stmt(func.body, _on_stmt))


def _on_stmt(s: Stmt) -> Stmt | None:
    if isinstance(s, For) and s.kind == "serial" and s.extent == 1 and _is_thread_loop(s.body):
        return substitute_stmt(s.body, {s.var: Const(0)})  # a one-iteration loop around a thread loop
    if isinstance(s, Seq):
        merged = _merge_runs(list(s.stmts))
        return seq(*merged) if len(merged) != len(s.stmts) else None
    if isinstance(s, Allocate) and s.buffer.scope != "shared" and _is_thread_loop(s.body):
        lp = s.body
        assert isinstance(lp, For)
        return replace(lp, body=Allocate(s.buffer, lp.body))
    return None


def _communicates(first: Stmt, second: Stmt) -> bool:
    """Whether the parts share a buffer other threads can see (shared or global) that one writes:
    separate loops ran every thread's first part before any second part, so a barrier must stay."""
    r1, w1 = _visible_accesses(first)
    r2, w2 = _visible_accesses(second)
    return bool(w1 & (r2 | w2) or w2 & r1)


def _visible_accesses(s: Stmt) -> tuple[set[str], set[str]]:
    reads: set[str] = set()
    writes: set[str] = set()
    for scope in ("shared", "global"):
        r, w = accesses_in_scope(s, scope)
        reads |= r
        writes |= w
    return reads, writes


def _is_thread_loop(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind in THREAD_IDX_KINDS


def _merge_runs(stmts: list[Stmt]) -> list[Stmt]:
    out: list[Stmt] = []
    for s in stmts:
        prev = out[-1] if out else None
        if (isinstance(prev, For) and isinstance(s, For) and _is_thread_loop(prev) and prev.kind == s.kind
                and prev.extent == s.extent):
            body = substitute_stmt(s.body, {s.var: prev.var})  # loop variables are unique: no capture
            parts: list[Stmt] = [prev.body]
            if _communicates(prev.body, body):
                parts.append(Barrier("shared"))
            out[-1] = replace(prev, body=seq(*parts, body))
        else:
            out.append(s)
    return out


__all__ = ["run"]
