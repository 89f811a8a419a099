"""check_launch_bounds: refuse, before any compiler runs, a kernel the device cannot launch.

    kernel k0: block (32, 64, 1) = 2048 threads   ==>   LoweringError: kernel tg_matmul_k0 needs 2048
                                                        threads per block; the target allows 1024

Checked per kernel: threads per block <= min(target.max_threads_per_block, 1024); shared memory
<= target.shared_memory_bytes; an estimate of 32-bit registers per thread (local buffers plus a
fixed overhead for indices and addresses) <= 255, and registers x threads <= 65536 (one SM's file).
Also: a thread loop smaller than its block dimension holding a barrier (some threads would skip it),
and a local buffer that threads of a block would share.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import Allocate, AllReduce, Barrier, For, Stmt
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu.common import AXES, THREAD_IDX_KINDS, allocated, thread_loops
from tilegraph.lower.gpu.split_host_device import DeviceKernel, GpuProgram

MAX_THREADS = 1024
MAX_REGISTERS_PER_THREAD = 255
REGISTER_FILE = 65536
REGISTER_OVERHEAD = 24


def run(program: GpuProgram, target: object) -> GpuProgram:
    kernels = tuple(check_kernel(k, target) for k in program.kernels)
    return replace(program, kernels=kernels)


def registers_estimate(body: Stmt) -> int:
    words = 0
    for a in allocated(body, "local"):
        words += a.buffer.size * max(1, a.buffer.dtype.itemsize // 4) * a.buffer.dtype.lanes
    return words + REGISTER_OVERHEAD


def check_kernel(k: DeviceKernel, target: object) -> DeviceKernel:
    limit = min(MAX_THREADS, int(getattr(target, "max_threads_per_block", None) or MAX_THREADS))
    if k.threads > limit:
        raise LoweringError(f"kernel {k.name} needs {k.threads} threads per block {k.block}; the target allows {limit}")
    smem = int(getattr(target, "shared_memory_bytes", None) or 48 << 10)
    if k.shared_bytes > smem:
        raise LoweringError(f"kernel {k.name} needs {k.shared_bytes} bytes of shared memory; the target allows {smem}")
    regs = registers_estimate(k.func.body)
    if regs > MAX_REGISTERS_PER_THREAD or regs * k.threads > REGISTER_FILE:
        raise LoweringError(f"kernel {k.name} needs about {regs} registers per thread x {k.threads} threads; "
                            f"the limits are {MAX_REGISTERS_PER_THREAD} per thread and {REGISTER_FILE} per block "
                            "(use smaller thread tiles)")
    for lp in thread_loops(k.func.body):
        full = k.block[AXES.index(lp.kind[-1])]
        if lp.extent < full and any(isinstance(x, (Barrier, AllReduce)) for x in walk_stmts(lp.body)):
            raise LoweringError(f"thread loop {lp.var.name} ({lp.kind}, extent {lp.extent}) is smaller than the "
                                f"block dimension {full} and holds a barrier or allreduce that the other threads "
                                "would skip")
    _check_local_outside_threads(k)
    return replace(k, registers=regs)


def _check_local_outside_threads(k: DeviceKernel) -> None:
    if k.threads == 1:
        return

    def go(s: Stmt, inside: bool) -> None:
        if isinstance(s, Allocate) and s.buffer.scope == "local" and not inside and thread_loops(s.body):
            raise LoweringError(f"local buffer {s.buffer.name} of kernel {k.name} would be shared by the threads of "
                                "a block; compute it under the threadIdx loops (or use scope 'shared')")
        inner = inside or (isinstance(s, For) and s.kind in THREAD_IDX_KINDS)
        from tilegraph.loop.visit import stmt_children

        for c in stmt_children(s):
            go(c, inner)

    go(k.func.body, False)


__all__ = ["check_kernel", "registers_estimate", "run"]
