"""fuse_epilogue: the stores of a scheduled kernel's output become stores of the fused
consumer chain's result (invertible elementwise and layout consumers, after scheduling).

    func conv(in0, in1, conv: [1, 8, 8, 32]):                fuse_epilogue(f, "conv", Y,
      ... conv_local[...] accumulates ...                       index=lambda i: i,
      for ax3 in range(32) vectorized:                          value=lambda v, i: max(v + bias[i[3]], 0))
        block conv_wb: conv[n, h, w, ax3] = conv_local[ax3]   ------------------------------------------>
      ... Y[n, h, w, ax3] = max(conv_local[ax3] + bias[ax3], 0.0f)

`index` maps the output's index to the consumer chain's (identity for elementwise consumers, a
permutation after a transpose, re-linearised after a reshape: an injective map, so each value is
stored once, to its one place). Legal only when the kernel never reads its output back: every
store then holds a final value (a schedule accumulating in the output gets `write_once` first).
"""

from __future__ import annotations

from collections.abc import Callable

from tilegraph.errors import ScheduleError
from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Buffer, BufferStore, Func, Stmt
from tilegraph.loop.visit import loads_under
from tilegraph.te.expr import Expr


def fuse_epilogue(func: Func, buffer: str, out: Buffer, index: Callable[[tuple[Expr, ...]], tuple[Expr, ...]],
                  value: Callable[[Expr, tuple[Expr, ...]], Expr]) -> Func:
    """`func` storing value(v, idx) to out[index(idx)] wherever it stored v to buffer[idx]; the
    output parameter `buffer` is replaced by `out`."""
    if not any(b.name == buffer for b in func.params):
        raise ScheduleError(f"fuse_epilogue: {func.name} has no parameter {buffer!r}")
    if any(x.buffer.name == buffer for x in loads_under(func.body)):
        raise ScheduleError(f"fuse_epilogue: {func.name} reads its output {buffer} back (it accumulates there); "
                            "the epilogue needs a write-once output")

    def store(s: Stmt) -> Stmt | None:
        if isinstance(s, BufferStore) and s.buffer.name == buffer:
            return BufferStore(out, index(tuple(s.indices)), value(s.value, tuple(s.indices)))
        return None

    body = rewrite_stmt(func.body, store)
    params = tuple(out if p.name == buffer else p for p in func.params)
    return Func(func.name, params, body, func.allocs, func.attrs)


__all__ = ["fuse_epilogue"]
