"""The compile driver: schedule (or workload) -> lowered IR -> C -> shared library -> Kernel.

    kernel = tg.build(sch)                  # a Schedule, as scheduled
    kernel = tg.build(wl, target="cpu")     # a Workload: default_schedule(wl, target) first
    c = kernel(a, b); kernel.source; kernel.lowered

default_schedule is simple and always legal: cheap intermediate spatial stages (padding,
transposes, elementwise producers) are inlined into their readers; then per block, the innermost
spatial loop (moved inside the reduce loops) is vectorised when it writes contiguously, the outer
spatial loops are fused and parallelised. Lowering hoists each reduction's init out of its reduce
loops (lower/passes/hoist_reduction_init.py).
"""

from __future__ import annotations

import os
from typing import Any

from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.errors import ScheduleError, TilegraphError
from tilegraph.loop.ir import Block, BufferStore
from tilegraph.loop.visit import find_block, walk_stmts
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.schedule.primitives.nest import is_alloc, readers
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.expr import BufferLoad, Call, Var
from tilegraph.te.visit import free_vars, walk
from tilegraph.te.workload import Workload

MAX_VECTOR_LOOP = 64
VECTOR_DTYPES = ("float32", "int32")


def _as_target(target: str | Target) -> Target:
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        return Target.from_string(target)
    raise TypeError(f"target must be a Target or a target string like 'cpu', got {type(target).__name__}")


def build(obj: Schedule | Workload, target: str | Target = "cpu", db: Any = None) -> Kernel:
    """Compile a Schedule (as is) or a Workload (with `db`'s best schedule when given, else
    default_schedule) into a callable Kernel."""
    tgt = _as_target(target)
    if tgt.kind in ("cuda", "opencl"):
        return _build_gpu(obj, tgt, db)
    if isinstance(obj, Workload):
        sch = _schedule_from_db(obj, tgt, db) if db is not None else None
        sch = sch if sch is not None else default_schedule(obj, tgt)
    elif isinstance(obj, Schedule):
        sch = obj
    else:
        raise TypeError(f"build expects a Schedule or a Workload, got {type(obj).__name__}")
    func = sch.func
    lowered = lower(func, tgt)
    src = codegen_c(lowered)
    lib = compile_c(src.code, tgt, name=src.entry)
    n_inputs = len(sch.workload.inputs)
    return Kernel(lib, src.entry, inputs=func.params[:n_inputs], outputs=func.params[n_inputs:],
                  source=src.code, target=tgt, lowered=lowered)


def _build_gpu(obj: Schedule | Workload, tgt: Target, db: Any) -> Any:
    """CUDA/OpenCL: lower.gpu pipeline, dialect printer, runtime kernel (CudaKernel/OpenCLKernel)."""
    from tilegraph.lower.gpu.pipeline import lower_gpu
    from tilegraph.tune.gensor.gpu_state import gpu_schedule

    if isinstance(obj, Workload):
        sch = _schedule_from_db(obj, tgt, db) if db is not None else None
        sch = sch if sch is not None else gpu_schedule(obj)
    elif isinstance(obj, Schedule):
        sch = obj
    else:
        raise TypeError(f"build expects a Schedule or a Workload, got {type(obj).__name__}")
    program = lower_gpu(sch.func, tgt)
    n_inputs = len(sch.workload.inputs)
    if tgt.kind == "opencl":
        from tilegraph.codegen.opencl import codegen_opencl
        from tilegraph.runtime.opencl import OpenCLKernel

        return OpenCLKernel(program, codegen_opencl(program), n_inputs)
    from tilegraph.codegen.cuda import codegen_cuda
    from tilegraph.runtime.cuda import CudaKernel

    return CudaKernel(program, codegen_cuda(program), n_inputs, tgt)


def _schedule_from_db(wl: Workload, target: Target, db: Any) -> Schedule | None:
    """The best recorded schedule of `wl` on `target`: `db` is a tuning database (anything with
    `best_schedule(workload, target)`) or the path of one, opened read-only."""
    if isinstance(db, (str, os.PathLike)):
        # tune/ sits above driver in the data flow; the path form is a convenience of the public API
        from tilegraph.tune.database import open_database

        db = open_database(db, readonly=True)
    lookup = getattr(db, "best_schedule", None)
    if lookup is None:
        raise TypeError(f"db must be a tuning database or the path of one, got {type(db).__name__}")
    return lookup(wl, target)


def default_schedule(wl: Workload, target: str | Target = "cpu") -> Schedule:
    """A simple, always-legal schedule: inline cheap producers (padding, elementwise), vectorise
    contiguous innermost spatial loops, fuse and parallelise the outer spatial loops."""
    tgt = _as_target(target)
    sch = Schedule(wl)
    _inline_producers(sch)
    for name in sch.block_names():
        _schedule_block(sch, name, tgt)
    return sch


def _inline_producers(sch: Schedule) -> None:
    """compute_inline the intermediate spatial blocks worth recomputing in their readers: padding
    stages and plain arithmetic always; transposes unless a reduction reads them (a transposed
    operand keeps a reduction's loads contiguous only when materialised); stages with math calls
    only where each reader is spatial and loads them once (never recomputed per reduction step)."""
    tags = {t.name: t.op.tag for t in sch.workload.computes}
    for name in sch.block_names():
        block = find_block(sch.func, name)
        if block.init is not None or any(iv.kind == "reduce" for iv in block.iter_vars):
            continue
        if not isinstance(block.body, BufferStore) or not is_alloc(sch.func, block.body.buffer.name):
            continue
        if tags.get(name) != "pad" and not _worth_inlining(sch, block, tags.get(name)):
            continue
        try:
            sch.compute_inline(name)
        except ScheduleError:  # not inlinable here (e.g. not stored at its iteration point): keep the stage
            continue


def _worth_inlining(sch: Schedule, block: Block, tag: str | None) -> bool:
    buffer = block.body.buffer.name  # type: ignore[attr-defined]
    consumers = [find_block(sch.func, r) for r in readers(sch.func.body, buffer)]
    into_reduction = any(iv.kind == "reduce" for c in consumers for iv in c.iter_vars)
    if tag == "transpose":
        return not into_reduction
    if any(isinstance(x, Call) for x in walk(block.body.value)):  # type: ignore[attr-defined]
        return not into_reduction and all(_load_count(c, buffer) == 1 for c in consumers)
    return True


def _load_count(block: Block, buffer: str) -> int:
    exprs = [e for s in walk_stmts(block.body) if isinstance(s, BufferStore) for e in (*s.indices, s.value)]
    return sum(isinstance(x, BufferLoad) and x.buffer.name == buffer for e in exprs for x in walk(e))


def _schedule_block(sch: Schedule, name: str, target: Target) -> None:
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
            head, inner = sch.split(last, factor)
            outer.append(head)
        if reduce:
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


__all__ = ["build", "default_schedule"]
