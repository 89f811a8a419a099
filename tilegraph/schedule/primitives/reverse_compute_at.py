"""reverse_compute_at: move a consumer block under a loop of its producer, running it on exactly
the region the producer writes in one iteration of that loop.

    for io in range(7):                                   reverse_compute_at(C_wb, jo)
      for jo in range(2):                                 ---------------------------->
        for ii in range(6), ji in range(32), k in range(50):
          block C(v_i=io*6+ii, v_j=jo*32+ji, v_k*=k) if io*6+ii < 37: ... C_local[v_i, v_j] ...
    for ax0 in range(37), ax1 in range(64):
      block C_wb(v0=ax0, v1=ax1): C[v0, v1] = C_local[v0, v1]

    for io in range(7):
      for jo in range(2):
        for ii, ji, k: block C(...) ...
        for ax0_1 in range(6):
          for ax1_1 in range(32):
            block C_wb(v0=io*6+ax0_1, v1=jo*32+ax1_1) if io*6+ax0_1 < 37: C[v0, v1] = C_local[v0, v1]

The consumer must be spatial, read the produced buffer(s) exactly at its own iteration point
(write-back blocks, elementwise epilogues) and be the only writer of its output. Every writer of
the produced buffer must lie under `loop`, and no loop at or above `loop` may drive a reduction of
a writer (the consumer would read partial sums). The nest goes right after the last statement of
the loop body that writes the buffer. The part of each produced buffer written in one iteration
must be a dense box (checked by loop.region.covers_box): the consumer reads all of it.
"""

from __future__ import annotations

from tilegraph.errors import ScheduleError
from tilegraph.loop.ir import Block, BufferStore, For, Func
from tilegraph.loop.region import RegionError, access_region, accesses, const_difference, covers_box, union
from tilegraph.loop.visit import blocks, walk_stmts
from tilegraph.schedule.primitives.common import get_block, get_loop, require
from tilegraph.schedule.primitives.compute_at import regenerate_nest, require_stores_at_iteration_point, single_output
from tilegraph.schedule.primitives.nest import (
    block_nest,
    block_reads,
    block_writes,
    check_dataflow,
    child_holding,
    insert_beside,
    loops_enclosing,
    remove_nest,
    writers,
)
from tilegraph.te.expr import BufferLoad, Const
from tilegraph.te.visit import uses_var, walk


def reverse_compute_at(func: Func, block: str, loop: str) -> tuple[Func, tuple[str, ...]]:
    where = f"reverse_compute_at({block}, {loop})"
    consumer = get_block(func, block)
    get_loop(func, loop)
    require(all(iv.kind == "spatial" for iv in consumer.iter_vars),
            f"{where}: block {block} is a reduction; only spatial consumers can follow a producer's loop")
    out = single_output(consumer, where)
    others = [w for w in writers(func.body, out.name) if w != block]
    require(not others, f"{where}: buffer {out.name} is also written by block(s) {others}")
    require_stores_at_iteration_point(consumer, out, where)
    nest, _ = block_nest(func, consumer)
    require(not any(isinstance(s, For) and s.var.name == loop for s in walk_stmts(nest)),
            f"{where}: loop {loop} belongs to block {block}'s own loop nest")

    stripped = remove_nest(func, consumer)
    target = get_loop(stripped, loop)
    require(target.kind != "vectorized", f"{where}: loop {loop} is vectorized; a loop nest cannot go inside it")
    read = [b.name for b in func.buffers if b.name != out.name and block_reads(consumer, b.name)]
    produced = [n for n in read if writers(target.body, n)]
    require(bool(produced), f"{where}: no block under loop {loop} writes a buffer that {block} reads")
    above = [*loops_enclosing(stripped, target), target]
    for name in produced:
        for x in _loads(consumer, name):
            require(_at_own_point(x.indices, consumer), f"{where}: block {block} must read {name} at its own iteration point")
        outside = [w for w in writers(stripped.body, name) if w not in writers(target.body, name)]
        require(not outside, f"{where}: block(s) {outside} outside loop {loop} also write {name}")
        for w in blocks(target.body):
            if not block_writes(w, name):
                continue
            for iv, bind in zip(w.iter_vars, w.bindings):
                racing = [lp.var.name for lp in above if iv.kind == "reduce" and uses_var(bind, lp.var)]
                require(not racing, f"{where}: loop {racing[0] if racing else ''} drives the reduction of block {w.name}; "
                                    f"{block} would read partial results of {name}")
    try:
        writes = {n: accesses(target.body, n, reads=False) for n in produced}
        regions = [access_region(items, what=n) for n, items in writes.items()]
        region = [union([r[d] for r in regions], f"dimension {d} of {block}'s domain") for d in range(len(out.shape))]
    except RegionError as e:
        raise ScheduleError(f"{where}: {e}") from None
    # Unlike compute_at (where computing more is only waste), a consumer run on an over-approximated
    # region would read elements this iteration never wrote.
    for (n, items), own in zip(writes.items(), regions):
        same_box = all(const_difference(a.start, b.start) == 0 and a.extent == b.extent for a, b in zip(own, region))
        require(same_box and covers_box(items),
                f"{where}: the part of {n} written in one iteration of {loop} is not a dense box (strided, "
                f"or through // and % of a fused loop); {block} would read elements not written yet")

    new_nest = regenerate_nest(func, consumer, region, above)
    anchor = child_holding(target.body, lambda s: any(writers(s, n) for n in produced), last=True)
    assert anchor is not None
    result = insert_beside(stripped, anchor, new_nest, after=True)
    check_dataflow(result, where)
    return result, ()


def _at_own_point(indices: tuple, b: Block) -> bool:
    """Whether `indices` name `b`'s own iteration point. Index 0 on an iteration variable of extent 1
    is that point too: a broadcast of a size-1 dimension reads it so (`add[n, h] = conv[0, h] + bias`)."""
    if len(indices) != len(b.iter_vars):
        return False
    return all(index == iv.var or (iv.extent == 1 and isinstance(index, Const) and index.value == 0)
               for index, iv in zip(indices, b.iter_vars))


def _loads(b: Block, name: str) -> list[BufferLoad]:
    exprs = [e for s in walk_stmts(b) if isinstance(s, BufferStore) for e in (*s.indices, s.value)]
    return [x for e in exprs for x in walk(e) if isinstance(x, BufferLoad) and x.buffer.name == name]


__all__ = ["reverse_compute_at"]
