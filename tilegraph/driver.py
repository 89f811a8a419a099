"""The compile driver: schedule (or workload) -> lowered IR -> C -> shared library -> Kernel.

    kernel = tg.build(sch)                  # a Schedule, as scheduled
    kernel = tg.build(wl, target="cpu")     # a Workload: default_schedule(wl, target) first
    c = kernel(a, b); kernel.source; kernel.lowered

A Workload without a recorded schedule gets `schedule/defaults.py`'s default (CPU or GPU). `db`
is a tuning database object (anything with `best_schedule(workload, target)`); `tg.build` also
accepts the path of one and opens it read-only (the database lives in tune/, above this layer).
"""

from __future__ import annotations

from typing import Any

from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.schedule.defaults import default_gpu_schedule, default_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target, as_target
from tilegraph.te.workload import Workload


def build(obj: Schedule | Workload, target: str | Target = "cpu", db: Any = None) -> Kernel:
    """Compile a Schedule (as is) or a Workload (with `db`'s best schedule when given, else
    default_schedule) into a callable Kernel."""
    tgt = as_target(target)
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

    if isinstance(obj, Workload):
        sch = _schedule_from_db(obj, tgt, db) if db is not None else None
        sch = sch if sch is not None else default_gpu_schedule(obj)
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
    `best_schedule(workload, target)`; `tg.build` opens a path for you)."""
    lookup = getattr(db, "best_schedule", None)
    if lookup is None:
        raise TypeError(f"db must be a tuning database (tg.build also takes the path of one), got {type(db).__name__}")
    return lookup(wl, target)


__all__ = ["build", "default_schedule", "default_gpu_schedule"]
