"""Device memory for whole models on a GPU target: one arena on the device, regions of it for the
model's tensors, constants uploaded once, kernels launched on device buffers (nothing crosses to
the host between kernels).

    memory = device_memory(target)              # OpenCLMemory (pyopencl) or CudaMemory (torch)
    arena = memory.alloc(nbytes)
    x = memory.region(arena, offset, nbytes)    # offset: a multiple of memory.alignment
    w = memory.constant(weights)                # uploaded once
    memory.upload(x, array); memory.launch(kernel, [x, w, y]); memory.synchronize()
    step = memory.prepare(kernel, [x, w, y]); step()   # the same launch, its arguments bound once
    replay = memory.capture(lambda: [memory.prepare(kernel, [x, w, y])])   # CUDA: one graph of the
    replay()                                                               # launches (None: not possible)
    memory.download(y, out)

One implementation per device API, beside the protocol. CUDA memory is torch's allocator (the CUDA
kernels take device pointers, runtime/cuda.py), so a CUDA model needs torch with CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from tilegraph.errors import BuildError
from tilegraph.target import Target


class DeviceMemory(Protocol):
    alignment: int  # bytes: every region offset is a multiple of it

    def alloc(self, nbytes: int) -> Any: ...
    def region(self, arena: Any, offset: int, nbytes: int) -> Any: ...
    def constant(self, array: np.ndarray) -> Any: ...
    def upload(self, handle: Any, array: np.ndarray) -> None: ...
    def download(self, handle: Any, out: np.ndarray) -> None: ...
    def launch(self, kernel: Any, handles: Sequence[Any]) -> None: ...
    def prepare(self, kernel: Any, handles: Sequence[Any]) -> Callable[[], None]: ...
    def capture(self, prepare_steps: Callable[[], list[Callable[[], None]]]) -> Callable[[], None] | None: ...
    def synchronize(self) -> None: ...


class OpenCLMemory:
    """pyopencl buffers on the runtime's device (runtime/opencl.py); regions are sub-buffers."""

    def __init__(self) -> None:
        import pyopencl as cl

        from tilegraph.runtime.opencl import _context

        self.cl = cl
        self.ctx, self.queue = _context()
        self.alignment = _opencl_alignment(self.ctx)
        self._temporaries: dict[int, dict[str, Any]] = {}

    def alloc(self, nbytes: int) -> Any:
        return self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, size=max(1, nbytes))

    def region(self, arena: Any, offset: int, nbytes: int) -> Any:
        if offset % self.alignment:
            raise BuildError(f"device region at offset {offset} is not {self.alignment}-byte aligned")
        return arena.get_sub_region(offset, max(1, nbytes))

    def constant(self, array: np.ndarray) -> Any:
        flags = self.cl.mem_flags.READ_ONLY | self.cl.mem_flags.COPY_HOST_PTR
        return self.cl.Buffer(self.ctx, flags, hostbuf=np.ascontiguousarray(array))

    def upload(self, handle: Any, array: np.ndarray) -> None:
        self.cl.enqueue_copy(self.queue, handle, np.ascontiguousarray(array))

    def download(self, handle: Any, out: np.ndarray) -> None:
        self.cl.enqueue_copy(self.queue, out, handle)
        self.queue.finish()

    def launch(self, kernel: Any, handles: Sequence[Any]) -> None:
        temps = self._temporaries.get(id(kernel))
        if temps is None:  # a multi-kernel program's own intermediates: allocated once per kernel
            temps = self._temporaries[id(kernel)] = {
                b.name: self.alloc(b.size * b.dtype.itemsize) for b in kernel.program.temporaries}
        kernel.launch_device(self.queue, handles, temps)

    def prepare(self, kernel: Any, handles: Sequence[Any]) -> Callable[[], None]:
        return lambda: self.launch(kernel, handles)

    def capture(self, prepare_steps: Callable[[], list[Callable[[], None]]]) -> Callable[[], None] | None:
        return None  # OpenCL has no graph of launches: the steps run one by one

    def synchronize(self) -> None:
        self.queue.finish()


class CudaMemory:
    """torch's CUDA allocator: the arena is one uint8 tensor, regions are views of it."""

    alignment = 256

    def __init__(self) -> None:
        from tilegraph.runtime.cuda import _torch_cuda

        torch = _torch_cuda()
        if torch is None:
            raise BuildError("a model on a cuda target keeps its tensors in GPU memory through torch: "
                             "install torch with CUDA (and run where an NVIDIA GPU is visible)")
        self.torch = torch

    def alloc(self, nbytes: int) -> Any:
        return self.torch.empty(max(1, nbytes), dtype=self.torch.uint8, device="cuda")

    def region(self, arena: Any, offset: int, nbytes: int) -> Any:
        if offset % self.alignment:
            raise BuildError(f"device region at offset {offset} is not {self.alignment}-byte aligned")
        return arena[offset: offset + max(1, nbytes)]

    def constant(self, array: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).cuda()

    def upload(self, handle: Any, array: np.ndarray) -> None:
        handle.copy_(self.torch.from_numpy(np.ascontiguousarray(array).reshape(-1).view(np.uint8)))

    def download(self, handle: Any, out: np.ndarray) -> None:
        # straight into `out`: `.cpu()` then a copy moved every output twice (GPT-2's logits are
        # 26 MB), a host tensor allocated per call
        if not out.flags.c_contiguous:
            raise BuildError("a device download needs a C-contiguous host array")
        self.torch.from_numpy(out.reshape(-1).view(np.uint8)).copy_(handle[: out.nbytes])

    def launch(self, kernel: Any, handles: Sequence[Any]) -> None:
        kernel._launch_device(list(handles))

    def prepare(self, kernel: Any, handles: Sequence[Any]) -> Callable[[], None]:
        """The launch with its device pointers read once (the regions never move): a call is one
        foreign-function call, on torch's current stream."""
        return kernel.bound_launch(list(handles), self.torch.cuda.current_stream().cuda_stream)

    def capture(self, prepare_steps: Callable[[], list[Callable[[], None]]]) -> Callable[[], None]:
        """The steps recorded once as a CUDA graph: a replay launches them all with one host call,
        on the current stream (per-kernel host work, a few microseconds a launch, is gone). The steps
        are prepared inside the capture, so they launch on the capturing stream. Every step must have
        run once before (a multi-kernel program's temporaries are made at its first launch, and an
        allocation cannot be captured). Raises where the capture fails; the caller then launches the
        steps one by one."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            for step in prepare_steps():
                step()
        return graph.replay

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()


def device_alignment(target: Target) -> int:
    """The region alignment `device_memory(target)` needs (the memory plan aligns offsets to it)."""
    if target.kind == "opencl":
        from tilegraph.runtime.opencl import _context

        return _opencl_alignment(_context()[0])
    return CudaMemory.alignment


def _opencl_alignment(ctx: Any) -> int:
    """Sub-buffer origins must be multiples of the device's base-address alignment (given in bits)."""
    return max(256, int(ctx.devices[0].mem_base_addr_align) // 8)


def device_memory(target: Target) -> DeviceMemory:
    """The device memory of a GPU target's runtime."""
    if target.kind == "opencl":
        return OpenCLMemory()
    if target.kind == "cuda":
        return CudaMemory()
    raise BuildError(f"{target.kind} targets keep tensors in host memory (graph/model.py), not device memory")


__all__ = ["CudaMemory", "DeviceMemory", "OpenCLMemory", "device_alignment", "device_memory"]
