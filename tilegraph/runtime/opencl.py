"""Run an OpenCL GpuProgram through pyopencl on any OpenCL device (PoCL on CPUs works).

    kernel = OpenCLKernel(program, codegen_opencl(program), n_inputs=2)
    c = kernel(a, b)                  numpy in, numpy out (float32 etc.; shapes checked)
    kernel.time(a, b, reps=10)        seconds per run, median of the runs

The device is the first one found, or the one whose name contains $TILEGRAPH_OPENCL_DEVICE.
Programs are built once per source text and context.
"""

from __future__ import annotations

import os
import statistics
import time
from functools import lru_cache
from typing import Any

import numpy as np

from tilegraph.codegen.gpu_dialect import GpuSource
from tilegraph.errors import BuildError
from tilegraph.lower.gpu.split_host_device import GpuProgram

DEVICE_ENV = "TILEGRAPH_OPENCL_DEVICE"


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

    wanted = os.environ.get(DEVICE_ENV, "").lower()
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


class OpenCLKernel:
    def __init__(self, program: GpuProgram, source: GpuSource, n_inputs: int):
        self.program = program
        self.source = source.code
        self.entries = source.kernels
        self.n_inputs = n_inputs
        self._cl_program = _build(source.code)
        import pyopencl as cl

        self._cl_kernels = [cl.Kernel(self._cl_program, entry) for entry in self.entries]

    @property
    def inputs(self) -> tuple:
        return self.program.params[: self.n_inputs]

    @property
    def outputs(self) -> tuple:
        return self.program.params[self.n_inputs:]

    def _check(self, arrays: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        if len(arrays) != self.n_inputs:
            raise ValueError(f"{self.program.name} takes {self.n_inputs} input array(s), got {len(arrays)}")
        out = []
        for b, a in zip(self.inputs, arrays):
            a = np.asarray(a)
            expected = int(np.prod(b.shape))
            if a.dtype != b.dtype.numpy or a.size != expected:
                raise ValueError(f"input {b.name}: expected {expected} elements of {b.dtype}, got shape {a.shape} "
                                 f"of {a.dtype}")
            out.append(np.ascontiguousarray(a))
        return out

    def _launch_all(self, queue: Any, buffers: dict[str, Any]) -> Any:
        event = None
        for k, fn in zip(self.program.kernels, self._cl_kernels):
            fn.set_args(*(buffers[b.name] for b in k.func.params))
            local = k.block
            global_size = tuple(g * b for g, b in zip(k.grid, k.block))
            import pyopencl as cl

            event = cl.enqueue_nd_range_kernel(queue, fn, global_size, local)
        return event

    def _buffers(self, inputs: list[np.ndarray]) -> tuple[dict[str, Any], list[np.ndarray]]:
        import pyopencl as cl

        ctx, _ = _context()
        mf = cl.mem_flags
        buffers: dict[str, Any] = {}
        for b, a in zip(self.inputs, inputs):
            buffers[b.name] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        results = []
        for b in self.outputs:
            host = np.full(b.size, np.nan, dtype=b.dtype.numpy) if b.dtype.is_float else np.zeros(b.size, b.dtype.numpy)
            buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
            results.append(host)
        for b in self.program.temporaries:
            buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE, size=max(1, b.size * b.dtype.itemsize))
        return buffers, results

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        import pyopencl as cl

        _, queue = _context()
        buffers, results = self._buffers(self._check(arrays))
        self._launch_all(queue, buffers)
        for b, host in zip(self.outputs, results):
            cl.enqueue_copy(queue, host, buffers[b.name])
        queue.finish()
        shapes = self.program.attrs.get("shapes", {})
        shaped = tuple(r.reshape(shapes.get(b.name, b.shape)) for r, b in zip(results, self.outputs))
        return shaped[0] if len(shaped) == 1 else shaped

    def time(self, *arrays: np.ndarray, reps: int = 10) -> float:
        """Median seconds of one run (all kernels), data already on the device."""
        _, queue = _context()
        buffers, _ = self._buffers(self._check(arrays))
        self._launch_all(queue, buffers)
        queue.finish()
        samples = []
        for _ in range(max(1, reps)):
            start = time.perf_counter()
            self._launch_all(queue, buffers)
            queue.finish()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)


__all__ = ["OpenCLKernel", "available", "device_limits"]
