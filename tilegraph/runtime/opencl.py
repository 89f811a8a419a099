"""Run an OpenCL GpuProgram through pyopencl on any OpenCL device (PoCL on CPUs works).

    kernel = OpenCLKernel(program, codegen_opencl(program), n_inputs=2)
    c = kernel(a, b)                  numpy in, numpy out (sizes and dtypes checked); out= too
    kernel.time(a, b)                 TimingResult: data on the device, each run waits for the queue

The device is the first one found, or the one whose name contains $TILEGRAPH_OPENCL_DEVICE.
Programs are built once per source text and context.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from tilegraph.codegen.gpu_dialect import GpuSource
from tilegraph.dtype import poisoned
from tilegraph.errors import BuildError
from tilegraph.lower.gpu.split_host_device import GpuProgram
from tilegraph.runtime.launch import KernelBase, check_flat_arrays
from tilegraph.target import OPENCL_DEVICE_ENV, Target, opencl_device_wanted

DEVICE_ENV = OPENCL_DEVICE_ENV


def available() -> bool:
    """True when pyopencl imports and at least one OpenCL device exists."""
    try:
        _context()
    except Exception:  # noqa: BLE001 (no driver, no ICD, no device: all mean unavailable)
        return False
    return True


@lru_cache(maxsize=1)
def _context() -> tuple[Any, Any]:
    import pyopencl as cl

    wanted = opencl_device_wanted()
    for platform in cl.get_platforms():
        for device in platform.get_devices():
            if not wanted or wanted in device.name.lower():
                ctx = cl.Context([device])
                return ctx, cl.CommandQueue(ctx)
    raise BuildError(f"no OpenCL device found{f' matching {wanted!r}' if wanted else ''}")


def device_limits() -> dict[str, int]:
    """max_threads_per_block / shared_memory_bytes / num_sms of the OpenCL device."""
    ctx, _ = _context()
    dev = ctx.devices[0]
    return {"max_threads_per_block": int(dev.max_work_group_size), "shared_memory_bytes": int(dev.local_mem_size),
            "num_sms": int(dev.max_compute_units), "device_name": str(dev.name)}


@lru_cache(maxsize=64)
def _build(code: str) -> Any:
    import pyopencl as cl

    ctx, _ = _context()
    try:
        return cl.Program(ctx, code).build(options=["-cl-std=CL1.2"])
    except cl.RuntimeError as err:
        raise BuildError(f"OpenCL build failed: {str(err).strip()[:2000]}") from None


class _OpenCLLaunch:
    """Device buffers made once; a run enqueues every kernel of the program and waits for it."""

    def __init__(self, kernel: OpenCLKernel, queue: Any, buffers: dict[str, Any], outs: list[np.ndarray]):
        self.kernel, self.queue, self.buffers, self.outs = kernel, queue, buffers, outs

    def run(self) -> None:
        self.kernel._launch_all(self.queue, self.buffers)
        self.queue.finish()

    def outputs(self) -> list[np.ndarray]:
        import pyopencl as cl

        for b, host in zip(self.kernel.outputs, self.outs):
            cl.enqueue_copy(self.queue, host, self.buffers[b.name])
        self.queue.finish()
        return self.outs


class OpenCLKernel(KernelBase):
    """The kernel protocol (runtime/launch.py) for an OpenCL program."""

    @property
    def entry(self) -> str:
        """The program's name (a model's kernel list shows it, as a CPU kernel's exported function)."""
        return self.program.name

    def __init__(self, program: GpuProgram, source: GpuSource, n_inputs: int, target: Target | None = None):
        self.program = program
        self.source = source.code
        self.entries = source.kernels
        self.n_inputs = n_inputs
        self.target = target if target is not None else Target("opencl")
        self.inputs = tuple(program.params[:n_inputs])
        self.outputs = tuple(program.params[n_inputs:])
        self._cl_program = _build(source.code)
        import pyopencl as cl

        self._cl_kernels = [cl.Kernel(self._cl_program, entry) for entry in self.entries]

    def output_arrays(self, out: Any) -> list[np.ndarray]:
        if out is not None:
            return super().output_arrays(out)
        shapes = self.program.attrs.get("shapes", {})
        return [poisoned(tuple(shapes.get(b.name, b.shape)), b.dtype.array_numpy) for b in self.outputs]

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> _OpenCLLaunch:
        """Copy the inputs and the (poisoned) outputs to device buffers once."""
        import pyopencl as cl

        inputs = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in inputs]
        check_flat_arrays(self.inputs, inputs, "input")
        check_flat_arrays(self.outputs, outputs, "output")
        ctx, queue = _context()
        mf = cl.mem_flags
        buffers: dict[str, Any] = {}
        for b, a in zip(self.inputs, inputs):
            buffers[b.name] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a.view(b.dtype.numpy))
        for b, a in zip(self.outputs, outputs):  # the poison travels to the device
            buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a.view(b.dtype.numpy))
        for b in self.program.temporaries:
            buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE, size=max(1, b.size * b.dtype.itemsize))
        return _OpenCLLaunch(self, queue, buffers, list(outputs))

    def launch_device(self, queue: Any, handles: Sequence[Any], temporaries: dict[str, Any]) -> Any:
        """Enqueue every kernel on device buffers: `handles` for the params (inputs then outputs),
        `temporaries` for the program's own intermediates (runtime/device_memory.py)."""
        if len(handles) != len(self.program.params):
            raise TypeError(f"{self.program.name} takes {len(self.program.params)} device buffers, got {len(handles)}")
        buffers = {b.name: h for b, h in zip(self.program.params, handles)}
        return self._launch_all(queue, {**temporaries, **buffers})

    def _launch_all(self, queue: Any, buffers: dict[str, Any]) -> Any:
        import pyopencl as cl

        event = None
        for k, fn in zip(self.program.kernels, self._cl_kernels):
            fn.set_args(*(buffers[b.name] for b in k.func.params))
            global_size = tuple(g * b for g, b in zip(k.grid, k.block))
            event = cl.enqueue_nd_range_kernel(queue, fn, global_size, k.block)
        return event


__all__ = ["OpenCLKernel", "available", "device_limits"]
