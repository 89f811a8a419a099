"""The GPU lowering pipeline: scheduled loop IR -> GpuProgram (host launches of device kernels).

    program = lower_gpu(sch.func, Target("cuda"))          # TILEGRAPH_DUMP_IR=1 prints each step
    tg.interpret(program.lowered, a, b)                      # the lowered IR still runs, barriers and all

GPU_PASSES run in order on the Func (thread/block loops stay loops, the printers turn them into
index builtins); split_host_device then cuts the kernels and check_launch_bounds refuses what the
device could not launch. The CPU passes are reused where the meaning is the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import Barrier, Block, BufferStore, Func
from tilegraph.loop.printer import func_str
from tilegraph.loop.verify import verify
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.lower.gpu import (
    check_launch_bounds,
    compact_gpu_buffers,
    cooperative_fetch,
    double_buffer,
    hoist_shared_allocs,
    insert_barriers,
    lower_allreduce_shared,
    lower_cross_thread_reduction,
    lower_thread_kinds,
    merge_thread_loops,
    register_accumulators,
    split_host_device,
    vectorize_copies,
)
from tilegraph.lower.gpu.split_host_device import GpuProgram
from tilegraph.lower.passes import expand_unroll, flatten_buffers, hoist_reduction_init, lower_blocks, simplify
from tilegraph.te.expr import Broadcast, BufferLoad, Ramp, Reduce, TensorRead
from tilegraph.te.visit import walk

DUMP_ENV = "TILEGRAPH_DUMP_IR"
GPU_KINDS = ("cuda", "opencl")
Pass = Callable[[Func, object], Func]
SUPPORTED_DTYPES = ("float32", "float64", "bfloat16", "int8", "uint8", "int32", "int64", "bool")


def _check_printable(func: Func, target: object) -> Func:
    for b in func.buffers:
        if b.dtype.name not in SUPPORTED_DTYPES:
            raise LoweringError(f"buffer {b.name} has dtype {b.dtype}, which the GPU printers do not support")
    for s in walk_stmts(func.body):
        if isinstance(s, Block):
            raise LoweringError(f"block {s.name} survived lowering (internal error)")
        if _is_vector_copy(s):
            continue
        for e in stmt_exprs(s):
            for x in walk(e):
                if isinstance(x, (Ramp, Broadcast, TensorRead, Reduce)):
                    raise LoweringError(f"{type(x).__name__} cannot be printed for a GPU target (internal error)")
    return func


def _is_vector_copy(s: object) -> bool:
    """vectorize_copies' `dst[ramp(i, 1, 4)] = src[ramp(j, 1, 4)]`, which the GPU printers print."""
    return (isinstance(s, BufferStore) and len(s.indices) == 1 and isinstance(s.indices[0], Ramp)
            and isinstance(s.value, BufferLoad) and len(s.value.indices) == 1 and isinstance(s.value.indices[0], Ramp))


GPU_PASSES: list[tuple[str, Pass]] = [
    ("compact_gpu_buffers", compact_gpu_buffers.run),
    ("cooperative_fetch", cooperative_fetch.run),
    ("lower_cross_thread_reduction", lower_cross_thread_reduction.run),
    ("merge_thread_loops", merge_thread_loops.run),
    ("hoist_reduction_init", hoist_reduction_init.run),
    ("lower_thread_kinds", lower_thread_kinds.run),
    ("lower_blocks", lower_blocks.run),
    ("simplify", simplify.run),
    ("flatten_buffers", flatten_buffers.run),
    ("expand_unroll", expand_unroll.run),
    ("final_simplify", simplify.run),
    ("vectorize_copies", vectorize_copies.run),
    ("register_accumulators", register_accumulators.run),
    ("lower_allreduce_shared", lower_allreduce_shared.run),
    ("hoist_shared_allocs", hoist_shared_allocs.run),
    ("insert_barriers", insert_barriers.run),
    ("double_buffer", double_buffer.run),
    ("check_printable", _check_printable),
]


def lower_gpu(func: Func, target: object, dump: bool | None = None, barriers: bool = True) -> GpuProgram:
    """Run GPU_PASSES, split into kernels and check launch bounds. `barriers=False` skips
    insert_barriers (for tests that show what a missing barrier does)."""
    kind = getattr(target, "kind", None)
    if kind not in GPU_KINDS:
        raise ValueError(f"lower_gpu needs a GPU target ({', '.join(GPU_KINDS)}), got {kind!r}")
    if dump is None:
        dump = os.environ.get(DUMP_ENV, "") not in ("", "0")
    if dump:
        print(f"# input\n{func_str(func)}")
    shapes = {b.name: b.shape for b in func.params}
    for name, run in GPU_PASSES:
        if name in ("insert_barriers", "double_buffer") and not barriers:
            continue
        func = run(func, target)
        if dump:
            print(f"# after {name}\n{func_str(func)}")
        verify(func)
    program = check_launch_bounds.run(split_host_device.split(func), target)
    # the params' shapes before flattening: kernels return outputs in them (a new value, never a mutation)
    return replace(program, attrs={**program.attrs, "shapes": shapes})


def has_barrier(func: Func) -> bool:
    return any(isinstance(s, Barrier) for s in walk_stmts(func.body))


__all__ = ["GPU_PASSES", "lower_gpu", "has_barrier"]
