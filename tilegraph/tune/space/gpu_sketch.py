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

gpu_rows (row operators: softmax, normalisations, reductions along the last axis;
schedule/gpu_rows.py): a block of rows, a row's lanes reducing across threads with warp shuffles;
the rows per block (1 to 8) and the lanes per row (8, 16 or 32, at most what the row needs) as
categorical decisions:

    for b in blockIdx.x: for r in threadIdx.y (rows): for l in threadIdx.x (lanes):
      m = warp_max(max over columns l, l + lanes, ... of x[row, c]);  s = warp_sum(...);  y = ...

gpu_flat (anything else, and row operators too): producers inlined, one output element per
thread, the threads per block a categorical decision (32 to 512). Every other block of a tiled
workload gets one element per thread. A program whose block would need more threads than MAX_THREADS is refused by the sketch
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
ROW_LANE_CHOICES = (8, 16, 32)


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


def gpu_rows(sch: Schedule, workload: Workload, decider: Decider) -> None:
    from tilegraph.schedule.gpu_rows import ROW_LANES, ROWS_PER_BLOCK, apply_row_kernel, is_row_operator, row_count, row_lanes

    if not is_row_operator(workload):
        raise ScheduleError("gpu_rows: not a row operator")
    rows = [n for n in ROWS_PER_BLOCK if n <= max(1, row_count(workload))]
    cap = row_lanes(workload, ROW_LANES)
    lanes = [n for n in ROW_LANE_CHOICES if n <= cap] or [cap]
    per_block = decider.categorical(sch, rows)
    width = decider.categorical(sch, lanes)
    apply_row_kernel(sch, int(per_block), int(width))


__all__ = ["FLAT_THREADS", "MAX_THREADS", "ROW_LANE_CHOICES", "gpu_flat", "gpu_multi_level_tiling", "gpu_rows",
           "gpu_tileable"]
