"""write_once: make a scheduled kernel store each element of an output exactly once, with its
final value, so an epilogue can be fused into that store (the trace so far is kept unchanged).

    for i_j_fused in range(12) parallel:                  write_once(sch, "C")
      for k in range(64):                                ----------------------->
        for j in range(40) vectorized:                     for i_j_fused in range(12) parallel:
          C[i, j] += A[i, k] * B[k, j]                        for k: for j vectorized: C_local[i, j] += ...
                                                              for ax1 in range(40) vectorized:
                                                                C[i, ax1] = C_local[i, ax1]

A schedule that accumulates into its output (the default schedules do) gets cache_write(local):
the accumulators become a buffer the lowering shrinks to the region of one iteration of the
innermost loop that drives no reduction, where the write-back goes (reverse_compute_at); its
innermost loop is vectorised when it can be. Nothing changes when the output is already
written once. ScheduleError when several blocks write the output.
"""

from __future__ import annotations

from tilegraph.errors import ScheduleError, TilegraphError
from tilegraph.loop.ir import Block, BufferStore, For
from tilegraph.loop.visit import blocks, find_block, loads_under, loops_above, walk_stmts
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.visit import free_vars


def reads_back(sch: Schedule, buffer: str) -> bool:
    return any(x.buffer.name == buffer for x in loads_under(sch.func.body))


def write_once(sch: Schedule, buffer: str) -> None:
    """Append cache_write (+ reverse_compute_at, vectorize) to `sch` when it reads `buffer` back."""
    if not reads_back(sch, buffer):
        return
    writers = [b for b in blocks(sch.func.body)
               if any(isinstance(s, BufferStore) and s.buffer.name == buffer for s in walk_stmts(b.body))]
    if len(writers) != 1:
        raise ScheduleError(f"write_once: {len(writers)} blocks write {buffer}; an epilogue needs one")
    block = writers[0]
    wb = sch.cache_write(block.name, "local")
    loop = _innermost_spatial_loop(sch, block)
    if loop is not None:
        sch.reverse_compute_at(wb, loop)
    own = [lp for lp in sch.loops(wb) if [b.name for b in blocks(_loop(sch, lp).body)] == [str(wb)]]
    if own:
        try:
            sch.vectorize(own[-1])
        except TilegraphError:
            pass  # not contiguous or too long: the write-back stays scalar


def _innermost_spatial_loop(sch: Schedule, block: Block) -> str | None:
    """The innermost loop above `block` outside every loop that drives one of its reductions."""
    current = find_block(sch.func, block.name)
    reduce_vars = set()
    for iv, binding in zip(current.iter_vars, current.bindings):
        if iv.kind == "reduce":
            reduce_vars |= {v.name for v in free_vars(binding)}
    chosen = None
    for loop in loops_above(sch.func, block.name):
        if loop.var.name in reduce_vars:
            break
        chosen = loop.var.name
    return chosen


def _loop(sch: Schedule, name: str) -> For:
    from tilegraph.loop.visit import find_loop

    return find_loop(sch.func, name)


__all__ = ["reads_back", "write_once"]
