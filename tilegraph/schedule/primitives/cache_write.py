"""cache_write: a block computes into a new buffer; a write-back block copies it to the original.

    for i, j, k:                               cache_write(C, "local")     for i, j, k:
      block C:                                ---------------------->        block C:
        init: C[v_i, v_j] = 0                                                  init: C_local[v_i, v_j] = 0
        C[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]                               C_local[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]
                                                                             for ax0, ax1:
                                                                               block C_wb(v0=ax0, v1=ax1):
                                                                                 C[v0, v1] = C_local[v0, v1]

The new buffer is `<output>_<scope>` (made fresh) and the write-back block `<output>_wb`; the
write-back nest is placed right after the top-level statement holding the block (move it with
reverse_compute_at). Legal when the block is the only writer of its single output buffer and no
other block in the same top-level statement reads that buffer (it would see stale values).
"""

from __future__ import annotations

from tilegraph.loop.edit import replace_buffer, replace_node
from tilegraph.loop.ir import SCOPES, Buffer, Func
from tilegraph.schedule.primitives.common import get_block, require
from tilegraph.schedule.primitives.nest import (
    check_dataflow,
    copy_nest,
    fresh_block_name,
    fresh_buffer_name,
    insert_beside,
    readers,
    root_stmt,
    stored_buffers,
    writers,
)


def cache_write(func: Func, block: str, scope: str = "local") -> tuple[Func, tuple[str, ...]]:
    where = f"cache_write({block})"
    require(scope in SCOPES, f"{where}: unknown scope {scope!r}; use one of {SCOPES}")
    target = get_block(func, block)
    outs = stored_buffers(target)
    require(len(outs) == 1, f"{where}: the block writes {len(outs)} buffers {[b.name for b in outs]}; need exactly one")
    out_buf = outs[0]
    others = [w for w in writers(func.body, out_buf.name) if w != block]
    require(not others, f"{where}: buffer {out_buf.name} is also written by block(s) {others}")
    top = root_stmt(func, block)
    early = [r for r in readers(top, out_buf.name) if r != block]
    require(not early, f"{where}: block(s) {early} read {out_buf.name} inside the same loop nest, before a write-back "
                       "could run")

    name = fresh_buffer_name(func, f"{out_buf.name}_{scope}")
    cache = Buffer(name, out_buf.shape, out_buf.dtype, scope)
    wb_name = fresh_block_name(func, f"{out_buf.name}_wb")
    result = replace_node(func, target, replace_buffer(target, out_buf.name, cache))
    nest, _ = copy_nest(result, wb_name, out_buf, cache, lambda vs: vs)
    result = insert_beside(result, root_stmt(result, block), nest, after=True)
    result = Func(result.name, result.params, result.body, (*result.allocs, cache), result.attrs)
    check_dataflow(result, where)
    return result, (wb_name,)


__all__ = ["cache_write"]
