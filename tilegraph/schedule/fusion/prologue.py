"""inline_prologue: every load of an input buffer of a scheduled kernel becomes an expression
over other buffers (the injective producers fused in front of an anchor, after scheduling).

    func matmul(in0: [16, 64], in1: [64, 32], C: [16, 32]):     inline_prologue(f, "in1",
      for i, j, k: C[i, j] += in0[i, k] * in1[k, j]              lambda (a, b): W[b, a])
                                                               ---------------------------->
    func matmul(in0: [16, 64], W: [32, 64], C: [16, 32]):
      for i, j, k: C[i, j] += in0[i, k] * W[j, k]              # the transpose read in place

Wherever the schedule reads the input (a packing copy, the micro-kernel, a padding select), it
now computes the producer's value there. The parameter is replaced by `new_params` (the buffers
the expression reads that the kernel does not have yet), appended to the inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tilegraph.errors import ScheduleError
from tilegraph.loop.edit import map_stmt_exprs
from tilegraph.loop.ir import Buffer, BufferStore, Func
from tilegraph.loop.visit import loads_under, walk_stmts
from tilegraph.te.expr import BufferLoad, Expr


def inline_prologue(func: Func, buffer: str, value: Callable[[tuple[Expr, ...]], Expr]) -> Func:
    """`func` with each load buffer[idx] replaced by value(idx); `buffer` leaves the parameters."""
    if not any(b.name == buffer for b in func.params):
        raise ScheduleError(f"inline_prologue: {func.name} has no parameter {buffer!r}")

    def load(e: Expr) -> Expr | None:
        if isinstance(e, BufferLoad) and e.buffer.name == buffer:
            return value(tuple(e.indices))
        return None

    body = map_stmt_exprs(func.body, load)
    if any(x.buffer.name == buffer for x in loads_under(body)):
        raise ScheduleError(f"inline_prologue: {buffer} is still read after inlining (an index reads it)")
    params = tuple(p for p in func.params if p.name != buffer)
    return Func(func.name, params, body, func.allocs, func.attrs)


def with_params(func: Func, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> Func:
    """`func` with its parameter list replaced; every buffer it uses must be a parameter or an
    allocation (ScheduleError naming the strays otherwise)."""
    known = {b.name for b in (*inputs, *outputs, *func.allocs)}
    used = {x.buffer.name for x in loads_under(func.body)}
    used |= {s.buffer.name for s in walk_stmts(func.body) if isinstance(s, BufferStore)}
    stray = sorted(used - known)
    if stray:
        raise ScheduleError(f"fused kernel {func.name} still uses {stray}, which are not its parameters")
    return Func(func.name, (*inputs, *outputs), func.body, func.allocs, func.attrs)


__all__ = ["inline_prologue", "with_params"]
