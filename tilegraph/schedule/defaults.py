"""Default schedules and the one inline policy every schedule builder uses.

    sch = default_schedule(wl, target)        # CPU: simple, always legal, reasonably fast
    sch = default_gpu_schedule(wl)            # CUDA/OpenCL: one output element per thread
    inline_producers(sch, policy="cheap")     # what default_schedule inlines
    inline_producers(sch, policy="all", keep={anchor}, keep_padding=True)   # what the tuner inlines

The default CPU schedule inlines cheap intermediate spatial stages (padding, transposes,
elementwise producers) into their readers; then per block, the innermost spatial loop (moved
inside the reduce loops) is vectorised when it writes contiguously, the outer spatial loops are
fused and parallelised. Lowering hoists each reduction's init out of its reduce loops.

before (conv with a padding stage):            after default_schedule:
    for ...: block pad(...)                        for n_h_fused in range(..) parallel:
    for n, h, w, co, ci, kh, kw:                     for w, ci, kh, kw: for co in range(64) vectorized:
      block conv(...)                                  block conv(...)   # pad inlined as a select
"""

from __future__ import annotations

import math

from tilegraph.errors import ScheduleError, TilegraphError
from tilegraph.loop.ir import Block, BufferStore, Func
from tilegraph.loop.visit import find_block, walk_stmts
from tilegraph.schedule.primitives.nest import is_alloc, readers
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target, as_target
from tilegraph.te.expr import BufferLoad, Call, Select, Var
from tilegraph.te.visit import free_vars, walk
from tilegraph.te.workload import Workload

MAX_VECTOR_LOOP = 64
# what lower_vectorize turns into vector statements (8-bit stores: computed in int32 lanes, narrowed
# as they store; a QuantizeLinear chain ran per element without them, 1.8 ms for 128 x 3072)
VECTOR_DTYPES = ("float32", "int32", "bfloat16", "uint8", "int8")
GPU_FLAT_THREADS = 64


# ------------------------------------------------------------------------------ the inline policy
def inline_producers(sch: Schedule, policy: str = "cheap", keep: frozenset[str] | set[str] = frozenset(),
                     keep_padding: bool = False, keep_costly: bool = False) -> None:
    """compute_inline intermediate spatial blocks into their readers (outputs and reductions stay).

    policy "cheap" (default schedules): padding stages and plain arithmetic always; transposes
    unless a reduction reads them (a transposed operand keeps a reduction's loads contiguous only
    when materialised); stages with math calls only where each reader is spatial and loads them
    once (never recomputed per reduction step).
    policy "all" (the tuners, which tile the anchor themselves): every one, producers last first.
    `keep` names blocks never inlined; `keep_padding` keeps padding stages (a micro-kernel would
    otherwise hold a guard per broadcast); `keep_costly` keeps a math stage that a reduction and
    another block read (on a CPU, softmax's exp computed once beats twice; a GPU recomputes rather
    than round-trip global memory). A stage the primitive refuses keeps its loop nest.
    """
    if policy not in ("cheap", "all"):
        raise ValueError(f"inline policy must be 'cheap' or 'all', got {policy!r}")
    tags = {t.name: t.op.tag for t in sch.workload.computes}
    names = sch.block_names()
    for name in reversed(names) if policy == "all" else names:
        if name in keep or name not in sch.block_names():
            continue
        block = find_block(sch.func, name)
        if block.init is not None or any(iv.kind == "reduce" for iv in block.iter_vars):
            continue
        if not isinstance(block.body, BufferStore) or not is_alloc(sch.func, block.body.buffer.name):
            continue
        if keep_padding and is_padding(block):  # a pad of width 0 is a plain copy: inlined like one
            continue
        if keep_costly and _costly_into_reduction(sch.func, block):
            continue  # exp/log/tanh... read by a reduction and again after it: inlining recomputes it
        padding = tags.get(name) == "pad" or is_padding(block)
        if policy == "cheap" and not padding and not _worth_inlining(sch.func, block, tags.get(name)):
            continue
        try:
            sch.compute_inline(name)
        except ScheduleError:  # not inlinable here (e.g. not stored at its iteration point): keep the stage
            continue


def is_padding(block: Block) -> bool:
    """A stage that selects between its input and a constant (zero padding, dilation holes)."""
    return any(isinstance(e, Select) for s in walk_stmts(block.body) if isinstance(s, BufferStore)
               for e in walk(s.value))


def _worth_inlining(func: Func, block: Block, tag: str | None) -> bool:
    buffer = block.body.buffer.name  # type: ignore[attr-defined]
    consumers = [find_block(func, r) for r in readers(func.body, buffer)]
    into_reduction = any(iv.kind == "reduce" for c in consumers for iv in c.iter_vars)
    if tag == "transpose":
        return not into_reduction
    if any(isinstance(x, Call) for x in walk(block.body.value)):  # type: ignore[attr-defined]
        return not into_reduction and all(_load_count(c, buffer) == 1 for c in consumers)
    return True


def _costly_into_reduction(func: Func, block: Block) -> bool:
    """A stage calling a math function whose value a reduction reads and another block reads too."""
    if not any(isinstance(x, Call) for x in walk(block.body.value)):  # type: ignore[attr-defined]
        return False
    consumers = [find_block(func, r) for r in readers(func.body, block.body.buffer.name)]  # type: ignore[attr-defined]
    return len(consumers) > 1 and any(iv.kind == "reduce" for c in consumers for iv in c.iter_vars)


def _load_count(block: Block, buffer: str) -> int:
    exprs = [e for s in walk_stmts(block.body) if isinstance(s, BufferStore) for e in (*s.indices, s.value)]
    return sum(isinstance(x, BufferLoad) and x.buffer.name == buffer for e in exprs for x in walk(e))


# ------------------------------------------------------------------------------ CPU
def default_schedule(wl: Workload, target: str | Target = "cpu") -> Schedule:
    """A simple, always-legal schedule: inline cheap producers (padding, elementwise), vectorise
    contiguous innermost spatial loops, fuse and parallelise the outer spatial loops."""
    tgt = as_target(target)
    if tgt.kind == "cpu":
        from tilegraph.schedule.attention import attention_schedule  # they build on inline_producers below
        from tilegraph.schedule.winograd import winograd_schedule

        fused = attention_schedule(wl, tgt)  # a fused attention operator: its row-block nest
        if fused is None:
            fused = winograd_schedule(wl, tgt)  # a Winograd transform: its points unrolled
        if fused is not None:
            return fused
    sch = Schedule(wl)
    inline_producers(sch, "cheap")
    for name in sch.block_names():
        schedule_block(sch, name, tgt)
    return sch


def schedule_block(sch: Schedule, name: str, target: Target) -> None:
    block = find_block(sch.func, name)
    loops = list(sch.loops(name))
    kinds = [iv.kind for iv in block.iter_vars]
    if len(loops) != len(kinds) or any(b != Var(lp) for b, lp in zip(block.bindings, loops)):
        return  # not the naive nest this recipe is written for
    spatial = [lp for lp, k in zip(loops, kinds) if k == "spatial"]
    reduce = [lp for lp, k in zip(loops, kinds) if k == "reduce"]
    if loops != spatial + reduce:
        return
    outer = list(spatial)
    inner: str | None = None
    if spatial and _writes_contiguously(block) and (not reduce or len(spatial) >= 2):
        last = spatial[-1]
        extent = block.iter_vars[len(spatial) - 1].extent
        outer = spatial[:-1]
        if extent <= MAX_VECTOR_LOOP:
            inner = last
        else:
            lanes = target.lanes("float32")
            factor = next((d for d in range(MAX_VECTOR_LOOP, 3, -1) if extent % d == 0 and d % 4 == 0), lanes)
            try:
                head, inner = sch.split(last, factor)
                outer.append(head)
            except TilegraphError:  # a tail past 32-bit indices (2**31 + 5 elements): not vectorised
                outer, inner = list(spatial), None
        if reduce and inner is not None:
            sch.reorder(*outer, *reduce, inner)
    try:
        if len(outer) >= 2:
            outer = [sch.fuse(*outer)]
        if outer:
            sch.parallel(outer[0])
        if inner is not None:
            sch.vectorize(inner)
    except TilegraphError:  # a recipe step this block does not allow: keep what was legal
        return


def _writes_contiguously(block: Block) -> bool:
    """The last spatial block variable indexes only the last dimension of the stored buffer."""
    spatial = [iv.var for iv in block.iter_vars if iv.kind == "spatial"]
    if not spatial:
        return False
    last = spatial[-1]
    stores = [s for s in walk_stmts(block.body) if isinstance(s, BufferStore)]
    if not stores:
        return False
    for s in stores:
        if s.buffer.dtype.name not in VECTOR_DTYPES or not s.indices or s.indices[-1] != last:
            return False
        if any(last in free_vars(i) for i in s.indices[:-1]):
            return False
    return True


# ------------------------------------------------------------------------------ GPU
def gpu_anchor(sch: Schedule) -> str:
    """The block a GPU schedule tiles: the last block with a reduction, else the last block."""
    names = sch.block_names()
    with_reduce = [n for n in names if any(iv.kind == "reduce" for iv in find_block(sch.func, n).iter_vars)]
    return (with_reduce or names)[-1]


def default_gpu_schedule(wl: Workload, threads: int = GPU_FLAT_THREADS) -> Schedule:
    """A row operator (softmax, layer norm, row reductions) gets its row kernel (one warp per row,
    schedule/gpu_rows.py), a matrix-vector product an output per warp (the same file); otherwise
    every stage but the anchor is inlined where it can be and each remaining block gets one output
    element per thread (`flat_gpu_schedule`). Always legal; the GPU tuner starts from the same
    inlining."""
    from tilegraph.schedule.gpu_rows import (  # gpu_rows builds on this module
        default_rows_per_block,
        matvec_gpu_schedule,
        row_gpu_schedule,
    )

    rows = row_gpu_schedule(wl, default_rows_per_block(wl))
    if rows is not None:
        return rows
    matvec = matvec_gpu_schedule(wl)
    if matvec is not None:
        return matvec
    sch = Schedule(wl)
    inline_producers(sch, "all", keep={gpu_anchor(sch)})
    for name in sch.block_names():
        flat_gpu_schedule(sch, name, threads)
    return sch


def flat_gpu_schedule(sch: Schedule, name: str, threads: int = GPU_FLAT_THREADS) -> None:
    """One output element per thread: fused spatial loops split [blocks, threads]."""
    blk = find_block(sch.func, name)
    loops = list(sch.loops(name))
    n_spatial = sum(iv.kind == "spatial" for iv in blk.iter_vars)
    spatial = loops[:n_spatial]
    if not spatial or any(iv.kind != "spatial" for iv in blk.iter_vars[:n_spatial]):
        raise ScheduleError(f"block {name}: no leading spatial loops to map onto GPU threads")
    fused = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    extent = math.prod(iv.extent for iv in blk.iter_vars[:n_spatial])
    bx, tx = sch.split(fused, [None, min(threads, extent)])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


__all__ = ["default_gpu_schedule", "default_schedule", "flat_gpu_schedule", "gpu_anchor", "inline_producers",
           "is_padding"]
