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

from tilegraph.loop.ir import GPU_LOOP_KINDS, Buffer, For, Func, Stmt
from tilegraph.lower.passes.compact_buffers import compact

_THREADS = tuple(k for k in GPU_LOOP_KINDS if not k.startswith("blockIdx"))


def run(func: Func, target: object = None) -> Func:
    return compact(func, widen=_thread_loops_for_shared)


def _thread_loops_for_shared(buf: Buffer, above: list[Stmt]) -> list[For]:
    """A shared tile spans every thread of the block; a local one belongs to one thread."""
    if buf.scope != "shared":
        return []
    return [lp for lp in above if isinstance(lp, For) and lp.kind in _THREADS]
