"""lower_allreduce_shared: on targets without warp shuffles (OpenCL C 1.2, e.g. PoCL), an AllReduce
goes through shared memory: every thread publishes its values, a barrier, every thread folds its
group's values in lane order, a barrier (so the scratch can be reused).

    for tx in range(32) threadIdx.x:              for tx in range(32) threadIdx.x:
      ...                                            ...
      allreduce(s_lane, sum, width=32)    ==>        s_lane_shared[tx] = s_lane[0]
                                                     barrier(shared)
                                                     s_lane[0] = s_lane_shared[tx - tx % 32]
                                                     for j in range(31):
                                                       s_lane[0] = s_lane[0] + s_lane_shared[tx - tx % 32 + j + 1]
                                                     barrier(shared)

The lanes are the enclosing thread loops, linearised x fastest (as the device numbers them). On
CUDA targets the pass does nothing: the printer spells AllReduce as __shfl_xor_sync.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import map_exprs, stmt_with_children
from tilegraph.loop.ir import Allocate, AllReduce, Buffer, BufferStore, For, Func, Stmt, seq
from tilegraph.loop.visit import stmt_children
from tilegraph.lower.gpu.common import THREAD_IDX_KINDS
from tilegraph.lower.passes.common import all_loop_names
from tilegraph.schedule.primitives.nest import fresh_buffer_name
from tilegraph.te.expr import BinOp, BufferLoad, Const, Expr, Var, combine
from tilegraph.te.simplify import simplify


def run(func: Func, target: object = None) -> Func:
    if getattr(target, "kind", None) == "cuda":
        return func
    names = {"loops": all_loop_names(func.body), "buffers": set()}
    return replace(func, body=_walk(func, func.body, (), names))


def _walk(func: Func, s: Stmt, threads: tuple[For, ...], names: dict[str, set[str]]) -> Stmt:
    if isinstance(s, AllReduce):
        return _lower(func, s, threads, names)
    if isinstance(s, For):
        inner = (*threads, s) if s.kind in THREAD_IDX_KINDS else threads
        return replace(s, body=_walk(func, s.body, inner, names))
    kids = stmt_children(s)
    if not kids:
        return s
    return stmt_with_children(s, tuple(_walk(func, k, threads, names) for k in kids))


def _lower(func: Func, s: AllReduce, threads: tuple[For, ...], names: dict[str, set[str]]) -> Stmt:
    if s.width == 1:
        return seq()
    by_axis = {lp.kind: lp for lp in threads}
    order = [by_axis[k] for k in ("threadIdx.z", "threadIdx.y", "threadIdx.x") if k in by_axis]
    lin: Expr = order[0].var
    count = order[0].extent
    for lp in order[1:]:
        lin = lin * Const(lp.extent) + lp.var
        count *= lp.extent
    tx = by_axis["threadIdx.x"].var
    size = s.buffer.size
    name = fresh_buffer_name(func, f"{s.buffer.name}_shared")
    while name in names["buffers"]:
        name = fresh_buffer_name(func, f"{name}_")
    names["buffers"].add(name)
    scratch = Buffer(name, (count * size,), s.buffer.dtype, "shared")
    base = lin - BinOp("floormod", tx, Const(s.width))
    publish, fold = [], []
    for e in range(size):
        mine = BufferLoad(s.buffer, (Const(e),))
        publish.append(BufferStore(scratch, (lin * Const(size) + Const(e),), mine))
        j = Var(_fresh_loop(names, f"{s.buffer.name}_lane_{e}"))
        first = BufferStore(s.buffer, (Const(e),), BufferLoad(scratch, (base * Const(size) + Const(e),)))
        at = (base + j + Const(1)) * Const(size) + Const(e)
        rest = For(j, s.width - 1, "serial", BufferStore(s.buffer, (Const(e),),
                                                          combine(s.combiner, mine, BufferLoad(scratch, (at,)))))
        fold += [first, rest]
    # insert_barriers (later) separates the publishing stores from the reads, and the reads from
    # the next publication, as for any shared buffer
    body = seq(*[map_exprs(x, simplify) for x in (*publish, *fold)])
    return Allocate(scratch, body)


def _fresh_loop(names: dict[str, set[str]], base: str) -> str:
    name, k = base, 0
    while name in names["loops"]:
        k += 1
        name = f"{base}_{k}"
    names["loops"].add(name)
    return name


__all__ = ["run"]
