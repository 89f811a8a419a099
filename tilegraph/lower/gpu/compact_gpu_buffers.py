"""compact_gpu_buffers: compact_buffers for GPU memory scopes. Each intermediate buffer is
allocated at the innermost loop enclosing its accesses (raised above loops driving a reduction
that writes it), shrunk to the region one iteration of that loop touches. The difference from the
CPU pass: a *shared* buffer's region is taken over every thread of the block (enclosing
threadIdx/vthread loops ranged), so all threads index one block-wide tile; a local buffer's region
is per thread (thread variables fixed).

    for i_1 in range(8) threadIdx.y:                      for i_1 in range(8) threadIdx.y:
      for k_0 in range(4):                                  for k_0 in range(4):
        for ax0 in range(2): for ax1 in range(8):     ==>     allocate a_shared: float32[16, 8] scope=shared
          block a_shared(v0=i_0*16 + i_1*2 + ax0, ...)          ... a_shared[v0 - i_0*16, v1 - k_0*8] = a[v0, v1]

After the pass `func.allocs` is empty.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.ir import GPU_LOOP_KINDS, Allocate, Block, Buffer, For, Func, Stmt
from tilegraph.loop.region import Interval, RegionError, accesses, interval, union
from tilegraph.loop.visit import blocks, replace_node, stmt_children
from tilegraph.lower.gpu.common import stmt_exprs
from tilegraph.schedule.primitives.nest import block_writes, replace_buffer
from tilegraph.te.expr import BufferLoad, Const, Expr
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import uses_var, walk

_THREADS = tuple(k for k in GPU_LOOP_KINDS if not k.startswith("blockIdx"))


def run(func: Func, target: object = None) -> Func:
    for buf in func.allocs:
        func = _compact(func, buf)
    return func


def _compact(func: Func, buf: Buffer) -> Func:
    allocs = tuple(b for b in func.allocs if b.name != buf.name)
    paths = _access_paths(func.body, buf.name)
    if not paths:
        return replace(func, allocs=allocs)
    prefix = _common_prefix(paths)
    scope = _scope_loop(func, buf.name, prefix)
    body = scope.body if scope is not None else func.body
    above = prefix[: prefix.index(scope) + 1] if scope is not None else []
    extra = [lp for lp in above if isinstance(lp, For) and lp.kind in _THREADS] if buf.scope == "shared" else []
    region = _region(body, buf, extra)
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
    out: list[list[Stmt]] = []
    path: list[Stmt] = []

    def touches(x: Stmt) -> bool:
        if getattr(x, "buffer", None) is not None and not isinstance(x, Allocate) and x.buffer.name == name:  # type: ignore[attr-defined]
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
        if isinstance(s, Block):
            return prefix[:n]
    return prefix


def _scope_loop(func: Func, name: str, prefix: list[Stmt]) -> For | None:
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
