"""Candidates of a workload with constant inputs, built as a compiled model runs them: a schedule
that packs a constant input at every call (a weight copied into tile-ordered panels) is built as
its packing kernel and the rest (runtime/prepacked.py), and the runner packs once per check,
before it times the rest. Without this, tuning charges the packing to every call while the model
packs once at compile time: schedules that pack (AMX's pair- and quad-interleaved panels above
all) looked slower than they run.

    build = prepacked_build(sch, workload, target, args, started)   # None: build it whole
    build.prepack  # (position, BuildResult of the packing kernel) where the kernel packs an input
"""

from __future__ import annotations

import dataclasses
import time

from tilegraph.lower.pipeline import lower
from tilegraph.lower.prepack import split_constant_packing
from tilegraph.runtime.backends import backend_for
from tilegraph.runtime.prepacked import compiled_cpu_kernel, prepacked_kernels
from tilegraph.schedule.schedule import Schedule
from tilegraph.stages import stage
from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.kernel_loader import describe_kernel
from tilegraph.tune.result import ArgSpec, BuildResult


def prepacked_build(sch: Schedule, workload: Workload, target: Target, args: tuple[ArgSpec, ...],
                    started: float) -> BuildResult | None:
    """The candidate's BuildResult, split where it packs one of the workload's constant inputs
    (the first that it packs, as graph/prepack.py picks); None for a workload without constants or
    a target that does not run CPU libraries here (the caller builds it whole)."""
    if not workload.constants or backend_for(target).kind != "cpu":
        return None
    with stage("lower"):
        lowered = lower(sch.func, target)
    n_inputs = len(workload.inputs)
    inputs, outputs = sch.func.params[:n_inputs], sch.func.params[n_inputs:]
    for position in workload.constants:
        split = split_constant_packing(lowered, lowered.params[position].name, n_inputs)
        if split is not None:
            break
    else:
        kernel = compiled_cpu_kernel(lowered, inputs, outputs, target)
        return describe_kernel(kernel, target, args, time.perf_counter() - started)
    pack, compute = prepacked_kernels(inputs, outputs, position, split, target)
    source = args[position]
    pack_args = (source, ArgSpec(split.packed.name, tuple(split.packed.shape), split.packed.dtype.array_numpy.name, True))
    packing = describe_kernel(pack, target, pack_args, 0.0)
    return dataclasses.replace(describe_kernel(compute, target, args, time.perf_counter() - started),
                               prepack=(position, packing))


__all__ = ["prepacked_build"]
