"""expand_unroll: an `unrolled` loop is replaced by copies of its body, one per iteration, with
the loop variable replaced by the iteration's constant (loops inside a copy get fresh names).

    for i_1 in range(2) unrolled:          C[i_0 * 2] = A[i_0 * 2] * 2.0f
      C[i_0 * 2 + i_1] = ...         ==>   C[i_0 * 2 + 1] = A[i_0 * 2 + 1] * 2.0f

Loops longer than MAX_UNROLL stay loops (the printer asks the C compiler to unroll them).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import For, Func, Stmt, seq
from tilegraph.lower.passes.common import all_loop_names, renamed_loops
from tilegraph.te.expr import Const

MAX_UNROLL = 512


def run(func: Func, target: object) -> Func:
    taken = all_loop_names(func.body)

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, For) and s.kind == "unrolled" and s.extent <= MAX_UNROLL:
            copies = [renamed_loops(substitute_stmt(s.body, {s.var: Const(c, s.var.dtype)}), taken, f"u{c}")
                      for c in range(s.extent)]
            return seq(*copies)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))
