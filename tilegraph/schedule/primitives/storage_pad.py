"""storage_pad: allocate extra elements per dimension of an intermediate buffer (storage only).

    alloc B_local: float32[8, 16] scope=local
        storage_pad(B_local, [0, 1])
    alloc B_local: float32[8, 16] scope=local padding=[0, 1]

Indices and the indexable shape do not change; the row pitch becomes 17, which spreads rows over
memory banks (GPU shared memory) or cache sets. The Buffer value is replaced everywhere it occurs
(allocs, loads, stores, allocations), since buffers compare by value.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import replace_buffer
from tilegraph.loop.ir import Func
from tilegraph.schedule.primitives.common import require


def storage_pad(func: Func, buffer: str, padding: list[int]) -> tuple[Func, tuple[str, ...]]:
    where = f"storage_pad({buffer})"
    params = [b.name for b in func.params]
    require(buffer not in params, f"{where}: {buffer} is a parameter of {func.name}; only intermediate buffers can be padded")
    found = [b for b in func.allocs if b.name == buffer]
    require(bool(found), f"{where}: no intermediate buffer named {buffer!r} (allocs: {[b.name for b in func.allocs]})")
    old = found[0]
    pads = list(padding)
    require(len(pads) == old.ndim, f"{where}: padding needs {old.ndim} entries, got {pads}")
    require(all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pads),
            f"{where}: padding entries must be non-negative integers, got {pads}")
    new = replace(old, padding=tuple(int(p) for p in pads))
    body = replace_buffer(func.body, buffer, new)
    allocs = tuple(new if b.name == buffer else b for b in func.allocs)
    return replace(func, body=body, allocs=allocs), ()


__all__ = ["storage_pad"]
