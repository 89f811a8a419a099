"""split_host_device: the lowered Func becomes a GpuProgram: global temporaries the host allocates,
and device kernels launched in order, one per top-level loop nest.

    allocate t: float32[64] scope=global           GpuProgram(temporaries=(t,), kernels=(
    for b in range(4) blockIdx.x:           ==>      DeviceKernel(k0, grid=(4,1,1), block=(16,1,1)),
      for tx in range(16) threadIdx.x: ...           DeviceKernel(k1, grid=(1,1,1), block=(1,1,1))))
    for i in range(64): ...    (unbound)

Grid and block sizes are the extents of the blockIdx / threadIdx loops (per axis, the largest
sibling; smaller siblings are guarded by the printer). A top-level nest with no GPU loop runs as a
one-thread kernel. blockIdx loops must enclose everything else of their nest, and a shared or
local buffer must live inside one kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import GPU_LOOP_KINDS, Allocate, Buffer, For, Func, Seq, Stmt
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu.common import AXES, BLOCK_KINDS, THREAD_IDX_KINDS, accesses_in_scope, allocated


@dataclass(frozen=True)
class DeviceKernel:
    """One kernel: `func.params` are the global buffers it touches (program params first)."""

    func: Func
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    registers: int = 0

    @property
    def name(self) -> str:
        return self.func.name

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class GpuProgram:
    name: str
    params: tuple[Buffer, ...]
    temporaries: tuple[Buffer, ...]
    kernels: tuple[DeviceKernel, ...]
    lowered: Func
    attrs: dict[str, object] = field(default_factory=dict, compare=False)  # set when made, never changed after


def split(func: Func) -> GpuProgram:
    temporaries: list[Buffer] = []
    nests = _top_level(func.body, temporaries)
    globals_ = [*func.params, *temporaries]
    kernels = []
    for n, nest in enumerate(nests):
        _check_nest(nest)
        used = _global_buffers(nest)
        params = tuple(b for b in globals_ if b.name in used)
        kfunc = Func(f"{func.name}_k{n}", params, nest)
        kernels.append(DeviceKernel(kfunc, _dims(nest, BLOCK_KINDS), _dims(nest, THREAD_IDX_KINDS), _shared_bytes(nest)))
    return GpuProgram(func.name, func.params, tuple(temporaries), tuple(kernels), func)


def _top_level(s: Stmt, temporaries: list[Buffer]) -> list[Stmt]:
    if isinstance(s, Seq):
        return [n for x in s.stmts for n in _top_level(x, temporaries)]
    if isinstance(s, Allocate):
        if s.buffer.scope != "global":
            raise LoweringError(f"buffer {s.buffer.name} (scope {s.buffer.scope}) is used by several loop nests; "
                                f"compute_at its producer inside its consumer's blockIdx loops, or use scope 'global'")
        if any(t.name == s.buffer.name for t in temporaries):
            # e.g. an unrolled top-level loop around the allocation, expanded into copies: kernels
            # find buffers by name, so two of one name would silently share (or lose) data
            raise LoweringError(f"global buffer {s.buffer.name} is allocated more than once at the top level (an "
                                f"unrolled loop around its allocation?); bind that loop to blocks or do not unroll it")
        temporaries.append(s.buffer)
        return _top_level(s.body, temporaries)
    return [s]


def _check_nest(nest: Stmt) -> None:
    body = nest
    while isinstance(body, For) and body.kind in BLOCK_KINDS:
        body = body.body
    for x in walk_stmts(body):
        if isinstance(x, For) and x.kind in BLOCK_KINDS:
            raise LoweringError(f"loop {x.var.name} is bound to {x.kind} inside other loops; blockIdx loops "
                                "must be the outermost loops of their nest")
        if isinstance(x, Allocate) and x.buffer.scope == "global":
            raise LoweringError(f"global buffer {x.buffer.name} would be allocated inside a kernel")


def _dims(nest: Stmt, kinds: tuple[str, ...]) -> tuple[int, int, int]:
    out = [1, 1, 1]
    for x in walk_stmts(nest):
        if isinstance(x, For) and x.kind in kinds:
            axis = AXES.index(x.kind[-1])
            out[axis] = max(out[axis], x.extent)
    return (out[0], out[1], out[2])


def _shared_bytes(nest: Stmt) -> int:
    seen: dict[str, int] = {}
    for a in allocated(nest, "shared"):
        seen[a.buffer.name] = a.buffer.size * a.buffer.dtype.itemsize
    return sum(seen.values())


def _global_buffers(nest: Stmt) -> set[str]:
    reads, writes = accesses_in_scope(nest, "global")
    return set(reads | writes)


def uses_gpu_loops(s: Stmt) -> bool:
    return any(isinstance(x, For) and x.kind in GPU_LOOP_KINDS for x in walk_stmts(s))


__all__ = ["DeviceKernel", "GpuProgram", "split"]
