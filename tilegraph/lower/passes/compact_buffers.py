"""compact_buffers: allocate each intermediate buffer where it is used, shrunk to the region one
iteration of that scope touches.

    alloc C_local: float32[37, 64]                        for i_0 in range(7):
    for i_0 in range(7):                                    for j_0 in range(2):
      for j_0 in range(2):                        ==>         allocate C_local: float32[6, 32]
        for ii, ji, k: block C: C_local[v_i, v_j] += ...        for ii, ji, k: block C: C_local[v_i - i_0*6, v_j - j_0*32] += ...
        for ax0, ax1: block C_wb: C[..] = C_local[v0, v1]       for ax0, ax1: block C_wb: C[..] = C_local[v0 - i_0*6, v1 - j_0*32]

Invariant: after the pass `func.allocs` is empty; every former alloc lives in an `Allocate` around
the body of its scope loop (or around the whole body), which is the innermost loop enclosing all
its accesses, raised above any loop that drives a reduction writing the buffer (an accumulator
must survive all iterations of its reduction). A fresh Allocate per iteration means that values
never flow between iterations of the scope loop, which holds because all accesses lie inside one
iteration. Per dimension, when the region touched in one iteration (loops inside the scope
ranged, the scope loop and those around it fixed) has a constant extent smaller than the
buffer's, the dimension shrinks to that extent and every index becomes `index - region_start`;
otherwise it is kept whole. The dimension order (layout) and storage padding are unchanged.
Index expressions inside blocks may then mention loop variables of the scope (region starts).

`compact(func, widen)` lets a target range some loops *around* the scope as well: the GPU pipeline
ranges the thread loops for shared buffers, so one block-wide tile serves every thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tilegraph.loop.edit import replace_buffer, replace_node
from tilegraph.loop.ir import Allocate, Block, Buffer, BufferStore, For, Func, Stmt
from tilegraph.loop.region import Interval, RegionError, accesses, interval, union
from tilegraph.loop.visit import blocks, stmt_children, stmt_exprs
from tilegraph.schedule.primitives.nest import block_writes
from tilegraph.te.expr import BufferLoad, Const, Expr
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import uses_var, walk

# (buffer, statements from the root down to the scope loop) -> enclosing loops whose range the region spans too.
Widen = Callable[[Buffer, list[Stmt]], list[For]]


def run(func: Func, target: object = None) -> Func:
    return compact(func)


def compact(func: Func, widen: Widen | None = None) -> Func:
    """Allocate and shrink every alloc of `func` (see the module docstring)."""
    for buf in func.allocs:
        func = _compact(func, buf, widen)
    return func


def _compact(func: Func, buf: Buffer, widen: Widen | None) -> Func:
    allocs = tuple(b for b in func.allocs if b.name != buf.name)
    paths = _access_paths(func.body, buf.name)
    if not paths:
        return replace(func, allocs=allocs)
    prefix = _common_prefix(paths)
    scope = _scope_loop(func, buf.name, prefix)
    body = scope.body if scope is not None else func.body
    above = prefix[: prefix.index(scope) + 1] if scope is not None else []
    region = _region(body, buf, widen(buf, above) if widen is not None else [])
    starts: list[Expr | None] = []
    shape: list[int] = []
    for n, iv in zip(buf.shape, region):
        shrink = iv is not None and iv.extent < n
        starts.append(iv.start if shrink else None)  # type: ignore[union-attr]
        shape.append(iv.extent if shrink else n)  # type: ignore[union-attr]
    new_buf = replace(buf, shape=tuple(shape))

    def relative(idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return tuple(i if s is None else simplify(i - s) for i, s in zip(idx, starts))

    new_body = Allocate(new_buf, replace_buffer(body, buf.name, new_buf, relative))
    func = replace(func, allocs=allocs)
    if scope is None:
        return replace(func, body=new_body)
    return replace_node(func, scope, replace(scope, body=new_body))


def _access_paths(s: Stmt, name: str) -> list[list[Stmt]]:
    """Paths (root first) to every statement that stores or loads buffer `name`."""
    out: list[list[Stmt]] = []
    path: list[Stmt] = []

    def touches(x: Stmt) -> bool:
        if isinstance(x, BufferStore) and x.buffer.name == name:
            return True
        return any(isinstance(e, BufferLoad) and e.buffer.name == name for root in stmt_exprs(x) for e in walk(root))

    def go(x: Stmt) -> None:
        path.append(x)
        if touches(x):
            out.append(list(path))
        for k in stmt_children(x):
            go(k)
        path.pop()

    go(s)
    return out


def _common_prefix(paths: list[list[Stmt]]) -> list[Stmt]:
    prefix = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(prefix), len(p)) and prefix[n] is p[n]:
            n += 1
        prefix = prefix[:n]
    for n, s in enumerate(prefix):
        if isinstance(s, Block):  # a buffer lives outside the blocks that use it
            return prefix[:n]
    return prefix


def _scope_loop(func: Func, name: str, prefix: list[Stmt]) -> For | None:
    """The innermost loop of `prefix` above every loop that drives a reduction writing `name`."""
    loops = [s for s in prefix if isinstance(s, For)]
    writers = [b for b in blocks(func.body) if block_writes(b, name)]
    for n, lp in enumerate(loops):
        if any(iv.kind == "reduce" and uses_var(bind, lp.var)
               for w in writers for iv, bind in zip(w.iter_vars, w.bindings)):
            return loops[n - 1] if n > 0 else None
    return loops[-1] if loops else None


def _region(body: Stmt, buf: Buffer, extra: list[For]) -> list[Interval | None]:
    items = accesses(body, buf.name)
    out: list[Interval | None] = []
    for d in range(buf.ndim):
        try:
            per = [interval(a.indices[d], {lp.var: lp.extent for lp in (*extra, *a.loops)}) for a in items]
            iv = union(per, f"dimension {d} of {buf.name}")
        except RegionError:
            out.append(None)
            continue
        out.append(iv if iv.extent >= 1 else Interval(Const(0), buf.shape[d]))
    return out


__all__ = ["run"]
