"""stack_small_buffers: a small global-scope allocation inside the kernel becomes a stack array.

After compact_buffers, an intermediate that one loop iteration touches only a little (a row's
maximum in softmax, a packed micro-panel) is allocated inside that loop. Left in "global" scope,
the C printer would call the allocator on every iteration; on the stack it costs nothing.

    for i in range(1024) parallel:                       for i in range(1024) parallel:
      allocate T_max: float32[1] scope=global    ==>       allocate T_max: float32[1] scope=local
        ...                                                  ...

Invariant: only `Allocate` nodes change (params and whole-kernel heap buffers are untouched), and
only when the storage is at most STACK_LIMIT_BYTES, so deep nesting cannot exhaust a thread's stack.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import replace_buffer, rewrite_stmt
from tilegraph.loop.ir import Allocate, Func, Stmt

STACK_LIMIT_BYTES = 16 * 1024


def run(func: Func, target: object = None) -> Func:
    def fn(s: Stmt) -> Stmt | None:
        if not isinstance(s, Allocate) or s.buffer.scope != "global":
            return None
        if s.buffer.size * s.buffer.dtype.itemsize > STACK_LIMIT_BYTES:
            return None
        stacked = replace(s.buffer, scope="local")
        return Allocate(stacked, replace_buffer(s.body, s.buffer.name, stacked))

    return replace(func, body=rewrite_stmt(func.body, fn))
