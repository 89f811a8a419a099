"""lower_thread_kinds: loop kinds a GPU thread executes itself become unrolled loops.

    for v in range(2) vthread:              for v in range(2) unrolled:       (expand_unroll then
      C_local[v * 4 + i] = ...       ==>      C_local[v * 4 + i] = ...         interleaves the copies)
    for j in range(4) vectorized: ...       for j in range(4) unrolled: ...

A virtual thread is a strided part of one thread's register tile (see docs: Gensor 1.7); unrolling
it gives every copy constant register offsets. A vectorized loop is unrolled (each thread issues
its lanes itself). A `parallel` loop has no GPU meaning: bind it to blockIdx/threadIdx instead.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.errors import LoweringError
from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import For, Func, Stmt


def run(func: Func, target: object = None) -> Func:
    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, For):
            if s.kind == "parallel":
                raise LoweringError(f"loop {s.var.name} is parallel, which a GPU target cannot run; "
                                    "bind it to blockIdx.* or threadIdx.* instead")
            if s.kind in ("vthread", "vectorized"):
                return replace(s, kind="unrolled")
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


__all__ = ["run"]
