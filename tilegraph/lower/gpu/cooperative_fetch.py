"""cooperative_fetch: a copy into a shared buffer, placed under the threadIdx loops by compute_at,
is redistributed so that the threads of a block copy the whole tile together, one element per
thread per step, instead of each thread copying the part it reads itself.

    for ty in range(8) threadIdx.y:                       for ty in range(8) threadIdx.y:
      for tx in range(8) threadIdx.x:                       for tx in range(8) threadIdx.x:
        for ax0 in range(2):                                  for f in range(2) unrolled:      (16*8 / 64 threads)
          for ax1 in range(8):                   ==>            block a_shared(v0=s0 + (f*64 + ty*8 + tx) // 8,
            block a_shared(v0=.., v1=..):                                      v1=s1 + (f*64 + ty*8 + tx) % 8):
              a_shared[v0 - s0, v1 - s1] = a[v0, v1]            a_shared[v0 - s0, v1 - s1] = a[v0, v1]

Runs after compact_gpu_buffers, which makes the store index `v - s` with `s` independent of the
threads. The copy loops are the loops that hold only the copy block. The new block is guarded by
`element < tile size` and by the bounds of every load of a global buffer, so a tile sticking out of
the source copies nothing there (the consumer never reads it). The result is correct whatever the
thread count; barriers come later (insert_barriers).
"""

from __future__ import annotations

import math
from dataclasses import replace

from tilegraph.loop.ir import Block, BlockVar, BufferStore, For, Func, Stmt
from tilegraph.loop.names import fresh_name
from tilegraph.lower.gpu.common import THREAD_IDX_KINDS
from tilegraph.lower.passes.common import all_loop_names, canonical_index
from tilegraph.te.expr import BufferLoad, Const, Expr, Var, all_of
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import free_vars, substitute, walk

MAX_UNROLLED_STEPS = 8


def run(func: Func, target: object = None) -> Func:
    taken = all_loop_names(func.body)
    return replace(func, body=_visit(func.body, [], taken))


def _visit(s: Stmt, threads: list[For], taken: set[str]) -> Stmt:
    if isinstance(s, For):
        if threads and s.kind == "serial":
            nest = _copy_nest(s)
            if nest is not None:
                new = _cooperative(nest, threads, taken)
                if new is not None:
                    return new
        inner = [*threads, s] if s.kind in THREAD_IDX_KINDS else threads
        body = _visit(s.body, inner, taken)
        return s if body is s.body else replace(s, body=body)
    from tilegraph.loop.visit import stmt_children, stmt_with_children

    kids = stmt_children(s)
    if not kids or isinstance(s, Block):
        return s
    new = tuple(_visit(k, threads, taken) for k in kids)
    return s if all(a is b for a, b in zip(new, kids)) else stmt_with_children(s, new)


def _copy_nest(s: For) -> tuple[list[For], Block] | None:
    """The serial loops holding only one shared-copy block, and that block."""
    loops: list[For] = []
    x: Stmt = s
    while isinstance(x, For) and x.kind in ("serial", "unrolled"):
        loops.append(x)
        x = x.body
    if not isinstance(x, Block) or x.init is not None or not isinstance(x.body, BufferStore):
        return None
    store = x.body
    if store.buffer.scope != "shared" or any(iv.kind != "spatial" for iv in x.iter_vars):
        return None
    return loops, x


def _cooperative(nest: tuple[list[For], Block], threads: list[For], taken: set[str]) -> Stmt | None:
    loops, blk = nest
    store = blk.body
    assert isinstance(store, BufferStore)
    own = {iv.var for iv in blk.iter_vars}
    if len(store.indices) != len(blk.iter_vars):
        return None
    starts: list[Expr] = []
    for iv, idx in zip(blk.iter_vars, store.indices):
        start = simplify(canonical_index(simplify(iv.var - idx)))
        if free_vars(start) & own or any(v.name in {lp.var.name for lp in loops} for v in free_vars(start)):
            return None
        starts.append(start)
    if any(v.name in {t.var.name for t in threads} for s in starts for v in free_vars(s)):
        return None
    shape = store.buffer.shape
    total = math.prod(shape)
    n_threads = math.prod(t.extent for t in threads)
    tid: Expr = Const(0)
    for t in threads:
        tid = tid * Const(t.extent) + t.var
    steps = -(-total // n_threads)
    name = fresh_name(f"{loops[0].var.name}_coop", taken)
    taken.add(name)
    step = Var(name)
    flat = simplify(step * Const(n_threads) + tid)
    bindings = []
    for d, start in enumerate(starts):
        inner = math.prod(shape[d + 1:])
        bindings.append(simplify(start + (flat // Const(inner)) % Const(shape[d])))
    mapping = {iv.var: b for iv, b in zip(blk.iter_vars, bindings)}
    guards = [flat.lt(total)]
    for load in (n for n in walk(store.value) if isinstance(n, BufferLoad) and n.buffer.scope == "global"):
        for idx, extent in zip(load.indices, load.buffer.shape):
            bound = simplify(substitute(idx, mapping))
            guards += [bound.ge(0), bound.lt(extent)]
    new_blk = Block(blk.name, tuple(BlockVar(iv.var, iv.extent, "spatial") for iv in blk.iter_vars),
                    tuple(bindings), store, None, simplify(all_of(*guards)))
    kind = "unrolled" if steps <= MAX_UNROLLED_STEPS else "serial"
    return For(step, steps, kind, new_blk)


__all__ = ["run"]
