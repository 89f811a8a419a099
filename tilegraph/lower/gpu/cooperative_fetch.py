"""cooperative_fetch: a copy into a shared buffer, placed under the threadIdx loops by compute_at,
is redistributed so that the threads of a block copy the whole tile together, one element per
thread per step, instead of each thread copying the part it reads itself. Where rows of the tile
are rows of the source (a pure copy, 32-bit, last dimension a multiple of 4), a thread copies four
neighbouring elements per step instead (an unrolled loop of 4 that vectorize_copies turns into one
float4 load and store where the addresses are aligned).

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
from tilegraph.te.arith import affine
from tilegraph.te.expr import BufferLoad, Const, Expr, Var, all_of
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import free_vars, substitute, walk

MAX_UNROLLED_STEPS = 8
VECTOR_LANES = 4  # float4: a thread copies four neighbouring elements where the rows allow it


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
    from tilegraph.loop.edit import stmt_with_children
    from tilegraph.loop.visit import stmt_children

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
    vec = VECTOR_LANES if _rows_copy_contiguously(blk, store) else 1
    steps = -(-total // (n_threads * vec))
    name = fresh_name(f"{loops[0].var.name}_coop", taken)
    taken.add(name)
    step = Var(name)
    lane = None
    if vec > 1:
        lane_name = fresh_name(f"{loops[0].var.name}_vec", taken)
        taken.add(lane_name)
        lane = Var(lane_name)
        flat = simplify((step * Const(n_threads) + tid) * Const(vec) + lane)
    else:
        flat = simplify(step * Const(n_threads) + tid)
    bindings = []
    for d, start in enumerate(starts):
        inner = math.prod(shape[d + 1:])
        bindings.append(simplify(start + (flat // Const(inner)) % Const(shape[d])))
    mapping = {iv.var: b for iv, b in zip(blk.iter_vars, bindings)}
    # Four lanes per thread: the lanes share every index but the last, whose value is 4-aligned at
    # lane 0 in a tile and sources whose rows are multiples of 4 (_rows_copy_contiguously), so lane
    # 0's guards hold for all four, and one guard lets vectorize_copies make one float4 copy.
    first = {} if lane is None else {lane: Const(0)}
    guards = [simplify(substitute(flat, first)).lt(total)]
    for load in (n for n in walk(store.value) if isinstance(n, BufferLoad) and n.buffer.scope == "global"):
        for idx, extent in zip(load.indices, load.buffer.shape):
            bound = simplify(substitute(substitute(idx, mapping), first))
            guards += [bound.ge(0), bound.lt(extent)]
    new_blk = Block(blk.name, tuple(BlockVar(iv.var, iv.extent, "spatial") for iv in blk.iter_vars),
                    tuple(bindings), store, None, simplify(all_of(*guards)))
    kind = "unrolled" if steps <= MAX_UNROLLED_STEPS else "serial"
    body: Stmt = new_blk if lane is None else For(lane, vec, "unrolled", new_blk)
    return For(step, steps, kind, body)


def _rows_copy_contiguously(blk: Block, store: BufferStore) -> bool:
    """Four neighbouring elements of the tile's last dimension are four neighbouring, 16-byte
    aligned elements of the shared tile and of every global buffer the copy reads, so a thread may
    copy them as one float4: 32-bit data; the tile's row pitch (padding included) and every source's
    rows are multiples of 4 elements; each load's last index is the tile's last coordinate plus
    terms free of the tile's coordinates, all multiples of 4. Otherwise four elements per thread
    would only spread a warp's scalar accesses over four times the sectors."""
    buf = store.buffer
    pitch = buf.storage_shape[-1]
    if buf.dtype.bits != 32 or buf.dtype.lanes != 1 or buf.shape[-1] % VECTOR_LANES or pitch % VECTOR_LANES:
        return False
    own = [iv.var for iv in blk.iter_vars]
    last = own[-1]
    loads = [n for n in walk(store.value) if isinstance(n, BufferLoad) and n.buffer.scope == "global"]
    if not loads or not isinstance(store.value, BufferLoad):
        return False
    for load in loads:
        *lead, tail = load.indices
        terms, const = affine(simplify(tail), through_casts=True)
        if terms.get(last) != 1 or any(a != last and free_vars(a) & set(own) for a in terms):
            return False
        if load.buffer.shape[-1] % VECTOR_LANES or const % VECTOR_LANES or any(
                c % VECTOR_LANES for a, c in terms.items() if a != last):
            return False
        if any(last in free_vars(i) for i in lead):
            return False
    return True


__all__ = ["run"]
