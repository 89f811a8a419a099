"""compute_inline: substitute a spatial block's expression into every reader and delete the block.

    for i0, i1:                                         compute_inline(pad)
      block pad(v_i0=i0, v_i1=i1):                     -------------------->
        pad[v_i0, v_i1] = select(1 <= v_i0 && ..., A[v_i0 - 1, v_i1 - 1], 0.0f)
    for h, w, k:                                                            for h, w, k:
      block conv: ... pad[v_h + v_k, v_w] ...                                 block conv: ... select(1 <= v_h + v_k && ...,
                                                                                            A[v_h + v_k - 1, v_w - 1], 0.0f) ...

The block's iteration variables are replaced by each load's index expressions; its loops (those
holding no other block) and its buffer disappear. Legal for a block with no reduction and a single
store of an intermediate buffer at its own iteration point, that no other block writes.
"""

from __future__ import annotations

from tilegraph.loop.edit import map_loads
from tilegraph.loop.ir import BufferStore, Func
from tilegraph.schedule.primitives.common import get_block, require
from tilegraph.schedule.primitives.compute_at import require_stores_at_iteration_point
from tilegraph.schedule.primitives.nest import is_alloc, remove_nest, stored_buffers, writers
from tilegraph.te.expr import BufferLoad, Expr
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, walk


def compute_inline(func: Func, block: str) -> tuple[Func, tuple[str, ...]]:
    where = f"compute_inline({block})"
    target = get_block(func, block)
    require(all(iv.kind == "spatial" for iv in target.iter_vars) and target.init is None,
            f"{where}: block {block} is a reduction; only spatial blocks can be inlined")
    require(isinstance(target.body, BufferStore),
            f"{where}: block {block} must consist of a single store to be inlined")
    assert isinstance(target.body, BufferStore)
    (buf,) = stored_buffers(target)
    require(is_alloc(func, buf.name), f"{where}: block {block} computes {buf.name}, an output of {func.name}; "
                                      "outputs cannot be inlined")
    others = [w for w in writers(func.body, buf.name) if w != block]
    require(not others, f"{where}: buffer {buf.name} is also written by block(s) {others}")
    require_stores_at_iteration_point(target, buf, where)
    value = target.body.value
    require(not any(isinstance(x, BufferLoad) and x.buffer.name == buf.name for x in walk(value)),
            f"{where}: block {block} reads the buffer it writes")
    iter_vars = [iv.var for iv in target.iter_vars]

    def inline(load: BufferLoad) -> Expr | None:
        if load.buffer.name != buf.name:
            return None
        return simplify(substitute(value, dict(zip(iter_vars, load.indices))))

    stripped = remove_nest(func, target)
    body = map_loads(stripped.body, inline)
    allocs = tuple(b for b in stripped.allocs if b.name != buf.name)
    return Func(stripped.name, stripped.params, body, allocs, stripped.attrs), ()


__all__ = ["compute_inline"]
