"""hoist_shared_allocs: every shared buffer is allocated once per kernel, around the body of the
innermost blockIdx loop, as the printed kernel declares it (`__shared__` / `__local` at the top).

    for bx in range(4) blockIdx.x:                     for bx in range(4) blockIdx.x:
      for tx in range(64) threadIdx.x:                   allocate a_shared: float32[64] scope=shared
        for k_0 in range(4):                     ==>       for tx in range(64) threadIdx.x:
          allocate a_shared: float32[64] scope=shared        for k_0 in range(4):
            ...                                                ...

The storage then persists across iterations of enclosing serial loops, so the interpreter sees
the same write-after-read hazards as the device (and checks the barriers that prevent them).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Allocate, For, Func, Stmt
from tilegraph.lower.gpu.common import BLOCK_KINDS, allocated


def run(func: Func, target: object = None) -> Func:
    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, For) and s.kind in BLOCK_KINDS and not (isinstance(s.body, For) and s.body.kind in BLOCK_KINDS):
            shared = allocated(s.body, "shared")
            if not shared:
                return None
            names = {a.buffer.name for a in shared}
            body = rewrite_stmt(s.body, lambda x: x.body if isinstance(x, Allocate) and x.buffer.name in names else None)
            seen: dict[str, Allocate] = {}
            for a in shared:
                seen.setdefault(a.buffer.name, a)
            for a in reversed(list(seen.values())):
                body = Allocate(a.buffer, body)
            return replace(s, body=body)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


__all__ = ["run"]
