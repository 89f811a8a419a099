"""GPU row kernels: one warp per row for operators whose reductions run along the rows of their
output (softmax, layer norm, RMS norm, and row reductions such as sum/mean/max over the last axis).

    sch = row_gpu_schedule(wl, rows_per_block=4)     # None when the workload is not a row operator

One kernel: blockIdx.x takes `rows_per_block` rows, threadIdx.y a row, the 32 lanes of threadIdx.x
its columns (coalesced: lane l reads columns l, l + 32, ...). Every reduction stage is computed at
the row and bound to threadIdx.x: a cross-thread reduction (each lane a partial result, then warp
shuffles; lower/gpu/lower_cross_thread_reduction.py), whose result every lane holds, so the next
stage needs no barrier. Elementwise producers are inlined (softmax's exp is recomputed rather than
stored). Built from public primitives only, so the trace replays.

A matrix-vector product (an FC layer at batch 1: one reduction stage whose outputs are one row of
N, reducing K elements) gets the same kernel with an output per warp (`matvec_gpu_schedule`): one
output per thread would sum K serially in each of only N threads (ResNet-50's 1x2048 . 2048x1000
head ran on 16 of an H200's 132 SMs, 16% of the model). Its elementwise epilogue is computed at
the warp's output; lowering runs it in lane 0, which holds the whole sum in a register.

    for j_0 in range(250) blockIdx.x:
      for j_1 in range(4) threadIdx.y:               # an output per warp
        for i in range(1):
          for k_1 in range(32) threadIdx.x:          # lanes split K (cross-thread reduction)
            for k_0 in range(64): y[i, j] += x[i, k] * w[k, j]
        for ...: out[i, j] = max(y[i, j], 0) + b[j]  # the epilogue at the output
"""

from __future__ import annotations

import math

from tilegraph.errors import TilegraphError
from tilegraph.loop.ir import Block
from tilegraph.loop.visit import find_block, find_loop, stmt_exprs, walk_stmts
from tilegraph.schedule.defaults import inline_producers
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.arith import affine
from tilegraph.te.expr import BufferLoad, Var
from tilegraph.te.visit import uses_var, walk
from tilegraph.te.workload import Workload

ROW_LANES = 32
ROWS_PER_BLOCK = (1, 2, 4, 8)
# Reasoned, not yet measured on a GPU: 4,096 outputs a thread each are 32 blocks of 128, about a
# quarter of an H100/H200's SMs; under 64 summed elements two of a warp's 32 lanes would add nothing
MATVEC_MAX_OUTPUTS = 4096
MATVEC_MIN_REDUCTION = 64


def is_row_operator(wl: Workload) -> bool:
    """One output; every reduction stage reduces along rows: each load that uses a reduce variable
    uses it as its last index (stride 1) and nowhere else. Either the output is computed over the
    rows the reductions produce plus a last (column) axis (softmax, normalisations), or the output
    is itself the one reduction (sum/max/mean over the last axis). GEMM and convolutions are not
    row operators: their operands read the reduction along other axes."""
    if len(wl.outputs) != 1:
        return False
    out = wl.outputs[0]
    reductions = [t for t in wl.computes if t.op.reduce_axes]
    if not reductions:
        return False
    if out.op.reduce_axes:
        shape_ok = len(reductions) == 1
    else:
        shape_ok = len(out.shape) >= 2 and all(tuple(t.shape) == tuple(out.shape[:-1]) for t in reductions)
    if not shape_ok:
        return False
    func = Schedule(wl).func
    return all(_reads_along_rows(find_block(func, t.name)) for t in reductions)


def _reads_along_rows(block: Block) -> bool:
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "reduce"}
    loads = [x for s in walk_stmts(block.body) for e in stmt_exprs(s) for x in walk(e) if isinstance(x, BufferLoad)]
    reads_reduction = False
    for load in loads:
        if not any(uses_var(i, v) for i in load.indices for v in reduce_vars):
            continue
        *lead, last = load.indices
        terms, _ = affine(last, through_casts=True)
        if any(uses_var(i, v) for i in lead for v in reduce_vars) or sorted(
                (c for a, c in terms.items() if a in reduce_vars)) != [1]:
            return False
        reads_reduction = True
    return reads_reduction


def row_count(wl: Workload) -> int:
    out = wl.outputs[0]
    shape = out.shape if out.op.reduce_axes else out.shape[:-1]
    count = 1
    for n in shape:
        count *= n
    return count


def default_rows_per_block(wl: Workload) -> int:
    """Four rows (128 threads) per block, fewer for fewer rows."""
    rows = row_count(wl) if wl.outputs else 1
    return max(n for n in ROWS_PER_BLOCK if n <= max(1, min(4, rows)))


def row_lanes(wl: Workload, lanes: int = ROW_LANES) -> int:
    """The lanes a row takes: `lanes`, halved while half of them would still cover a short row."""
    out = wl.outputs[0]
    columns = math.prod(ax.extent for ax in out.op.reduce_axes) if out.op.reduce_axes else out.shape[-1]
    while lanes > 1 and lanes // 2 >= columns:  # a short row: fewer lanes, a power of two
        lanes //= 2
    return lanes


def row_gpu_schedule(wl: Workload, rows_per_block: int = 1, lanes: int = ROW_LANES) -> Schedule | None:
    """The row kernel of `wl`, or None when `wl` is not a row operator or a primitive refuses."""
    if not is_row_operator(wl):
        return None
    try:
        sch = Schedule(wl)
        apply_row_kernel(sch, rows_per_block, row_lanes(wl, lanes))
        return sch
    except TilegraphError:
        return None


def apply_row_kernel(sch: Schedule, rows_per_block: int, lanes: int) -> None:
    """Schedule the row operator `sch.workload` (unscheduled) as a row kernel, in place: `rows_per_block`
    rows a block, `lanes` (a power of two up to 32) threads a row. Raises when a primitive refuses."""
    wl = sch.workload
    out = wl.outputs[0]
    reductions = [t.name for t in wl.computes if t.op.reduce_axes]
    inline_producers(sch, "all", keep=set(reductions))
    if out.op.reduce_axes:
        row, ty = _rows(sch, out.name, sch.loops(out.name)[:len(out.shape)], rows_per_block)
        _cross_thread(sch, out.name, ty, lanes)
        return
    loops = sch.loops(out.name)
    row_loop, ty = _rows(sch, out.name, loops[:-1], rows_per_block)
    cols, tx = sch.split(loops[-1], [None, lanes])
    sch.reorder(row_loop, ty, tx, cols)
    sch.bind(tx, "threadIdx.x")
    for name in reversed(reductions):
        if name in sch.block_names():
            sch.compute_at(name, ty)
            _cross_thread(sch, name, ty, lanes)


def is_matvec(wl: Workload) -> bool:
    """One output and one reduction stage, whose spatial extents are all 1 but the last (at most
    MATVEC_MAX_OUTPUTS) and which reduces at least MATVEC_MIN_REDUCTION elements. Above that many
    outputs, one per thread fills the GPU and reads a K x N matrix coalesced."""
    if len(wl.outputs) != 1:
        return False
    reductions = [t for t in wl.computes if t.op.reduce_axes]
    if len(reductions) != 1 or not reductions[0].shape:
        return False
    *lead, n = reductions[0].shape
    k = math.prod(ax.extent for ax in reductions[0].op.reduce_axes)
    return all(e == 1 for e in lead) and n <= MATVEC_MAX_OUTPUTS and k >= MATVEC_MIN_REDUCTION


def matvec_gpu_schedule(wl: Workload, rows_per_block: int | None = None, lanes: int = ROW_LANES) -> Schedule | None:
    """An output per warp for a matrix-vector product (module docstring); None when `wl` is not one
    (`is_matvec`) or a primitive refuses."""
    if not is_matvec(wl):
        return None
    (red,) = [t for t in wl.computes if t.op.reduce_axes]
    n = red.shape[-1]
    rows = rows_per_block or max(r for r in ROWS_PER_BLOCK if r <= max(1, min(4, n)))
    try:
        sch = Schedule(wl)
        inline_producers(sch, "all", keep={red.name})
        spatial = sch.loops(red.name)[:len(red.shape)]
        grid, ty = sch.split(spatial[-1], [None, rows])
        # the leading loops (one iteration each) under the warp's row, so the sum's index is one
        # element per thread (lower_cross_thread_reduction keeps it in a register)
        sch.reorder(grid, ty, *spatial[:-1])
        sch.bind(grid, "blockIdx.x")
        sch.bind(ty, "threadIdx.y")
        _cross_thread(sch, red.name, ty, lanes)
        for name in sch.block_names():
            if name != red.name:
                sch.reverse_compute_at(name, ty)
        return sch
    except TilegraphError:
        return None


def _rows(sch: Schedule, block: str, row_loops: list[str] | tuple[str, ...], rows_per_block: int) -> tuple[str, str]:
    """Fuse the row loops, split them into blocks of `rows_per_block` rows, bind both."""
    row = sch.fuse(*row_loops) if len(row_loops) > 1 else row_loops[0]
    grid, ty = sch.split(row, [None, rows_per_block])
    sch.bind(grid, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    return grid, ty


def _cross_thread(sch: Schedule, block: str, ty: str, lanes: int) -> None:
    """The block's reduction loops under `ty`, fused and split so their inner `lanes` are bound to
    threadIdx.x (outside the serial remainder)."""
    own = list(sch.loops(block))
    own = own[own.index(ty) + 1:]
    blk = find_block(sch.func, block)
    reduce_binds = [b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce"]
    red = [n for n in own if any(uses_var(b, _var(sch, n)) for b in reduce_binds)]
    r = sch.fuse(*red) if len(red) > 1 else red[0]
    outer, lane = sch.split(r, [None, lanes])
    sch.reorder(lane, outer)
    sch.bind(lane, "threadIdx.x")


def _var(sch: Schedule, loop: str) -> Var:
    return find_loop(sch.func, loop).var


__all__ = ["MATVEC_MAX_OUTPUTS", "MATVEC_MIN_REDUCTION", "ROWS_PER_BLOCK", "ROW_LANES", "apply_row_kernel",
           "default_rows_per_block", "is_matvec", "is_row_operator", "matvec_gpu_schedule", "row_count",
           "row_gpu_schedule", "row_lanes"]
