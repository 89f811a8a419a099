"""GPU sketches: Gensor's GPU tiling (tune/gensor/gpu_state.py) as sketches with sampled decisions,
so the evolutionary search mutates GPU programs as it mutates CPU ones.

    sch = apply_sketch(wl, "gpu_multi_level_tiling", Decider(rng))    # one random GPU program

gpu_multi_level_tiling (an anchor the GPU search can tile: its loops are its own axes), per
spatial axis a decision [grid, vthread, threads, c] (block tile = vthread * threads * c, each
thread owning vthread chunks of c elements), per reduce axis [outer, rstep]; whether the inputs
are staged in shared memory at the innermost reduce outer loop, and the row padding of those
tiles (0, 1 or 4 elements) as categorical decisions:

    for b in grid (fused, blockIdx.x):
      for t in threads (fused, threadIdx.x):
        C_local = 0                                  # register tile (no vthreads), else in place
        for k_outer: A_shared, B_shared = ...        # cooperative fetch (optional, padded)
          for k_inner: for v (vthread): for c (unrolled): C_local[...] += ...
        C[...] = C_local[...]

gpu_flat (anything else): producers inlined, one output element per thread, the threads per block
a categorical decision (32 to 512); row operators too (their warp-per-row kernels are Gensor's
candidates, not a sketch yet). Every other block of a tiled workload gets one element per
thread. A program whose block would need more threads than MAX_THREADS is refused by the sketch
(ScheduleError), as the postprocessor refuses CPU programs that unroll too much.
"""

from __future__ import annotations

import math

from tilegraph.errors import ScheduleError
from tilegraph.schedule.defaults import flat_gpu_schedule, gpu_anchor, inline_producers
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.workload import Workload
from tilegraph.tune.space.decider import Decider

FLAT_THREADS = (32, 64, 128, 256, 512)
MAX_THREADS = 1024  # threads per block every CUDA device and PoCL accept
MAX_REGISTER_TILE = 64  # elements a thread accumulates (its c chunks over every axis, times vthreads)
PADS = (0, 1, 4)


def gpu_tileable(workload: Workload) -> bool:
    """Whether the GPU tiling sketch applies: the anchor's loops are its own axes, spatial first."""
    from tilegraph.tune.gensor.gpu_state import GpuSpace

    space = GpuSpace.from_workload(workload)
    return space.naive and bool(space.spatial)


def gpu_multi_level_tiling(sch: Schedule, workload: Workload, decider: Decider) -> None:
    from tilegraph.tune.gensor.gpu_state import GpuSpace, tile_gpu_anchor

    space = GpuSpace.from_workload(workload)
    if not (space.naive and space.spatial):
        raise ScheduleError("gpu_multi_level_tiling: the anchor's loops are not its own axes")
    name = space.anchor
    inline_producers(sch, "all", keep={name})
    for other in sch.block_names():
        if other != name:
            flat_gpu_schedule(sch, other)
    loops = list(sch.loops(name))
    ns = len(space.spatial)
    spatial = [list(decider.tile(sch, lp, 4)) for lp in loops[:ns]]  # [grid, vthread, threads, c]
    threads = math.prod(int(f[2]) for f in spatial)
    tile = math.prod(int(f[1]) * int(f[3]) for f in spatial)
    if threads > MAX_THREADS or tile > MAX_REGISTER_TILE:
        raise ScheduleError(f"gpu_multi_level_tiling: {threads} threads per block, {tile} elements per thread")
    reduce = [list(decider.tile(sch, lp, 2)) for lp in loops[ns:]]  # [outer, rstep]
    shared = decider.categorical(sch, [0, 1]) if reduce else 0
    pad = decider.categorical(sch, list(PADS)) if shared else 0
    tile_gpu_anchor(sch, name, spatial, reduce, bool(shared), pad)


def gpu_flat(sch: Schedule, workload: Workload, decider: Decider) -> None:
    threads = decider.categorical(sch, list(FLAT_THREADS))
    inline_producers(sch, "all", keep={gpu_anchor(sch)})
    for name in sch.block_names():
        flat_gpu_schedule(sch, name, threads)


__all__ = ["FLAT_THREADS", "MAX_THREADS", "gpu_flat", "gpu_multi_level_tiling", "gpu_tileable"]
