"""Per-target kernels for measurement: what a build worker ships, and how the runner's worker runs it.

    build = describe_kernel(kernel, target, args, secs)     # build worker: a picklable BuildResult
    launch = load_kernel(build, num_threads).bind(inputs, poisoned_outputs)    # runner worker
    launch.run()                                            # one complete run (device finished)
    outputs = launch.outputs()                              # host arrays, to check against the reference
    samples = time_runs(launch.run, policy)

The runner's check-and-time code is the same for every target; only binding arrays and one run
differ. A loader per BuildResult.loader implements that part:

    loader     the worker rebuilds                                       run() / outputs()
    runtime    tilegraph.runtime Kernel from the .so (CPU)                 ctypes call / the arrays themselves
    raw        ctypes function from a hand-written .so (test hook)        ctypes call / the arrays themselves
    opencl     OpenCLKernel from the generated source (contexts cannot   launch all kernels + finish() /
               cross processes; the program is rebuilt in the worker)    copy device buffers back
    cuda       CudaKernel from the cached .so (nvcc already ran)         launch + synchronize on torch device
                                                                         arrays; without torch, run_host
                                                                         (times include host<->device copies)
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tilegraph.tune.result import ArgSpec, BuildResult


class Launch(Protocol):
    def run(self) -> None:
        """One complete run of the kernel on the bound arrays; returns once the device has finished."""

    def outputs(self) -> list[np.ndarray]:
        """The output arrays on the host, as the last run left them."""


class LoadedKernel(Protocol):
    def bind(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> Launch:
        """Bind inputs and (poisoned) output arrays once; timed runs reuse the binding."""


@dataclass(frozen=True)
class GpuKernelSpec:
    """What a runner worker needs to rebuild a GPU kernel: the printed source (with its program)."""

    source: Any  # codegen.gpu_dialect.GpuSource
    n_inputs: int
    target: Any  # tilegraph.target.Target


# ---------------------------------------------------------------------------- build worker side
def describe_kernel(kernel: Any, target: Any, args: tuple[ArgSpec, ...], build_time_s: float) -> BuildResult:
    """A BuildResult that lets load_kernel rebuild `kernel` (built for `target`) in another process."""
    kind = getattr(target, "kind", "cpu")
    if kind == "cpu":
        return BuildResult(True, lib_path=str(kernel.lib_path), entry=str(kernel.entry), source=kernel.source, args=args,
                           loader="runtime", build_time_s=build_time_s, input_buffers=tuple(kernel.inputs),
                           output_buffers=tuple(kernel.outputs), kernel_target=kernel.target)
    from tilegraph.codegen.gpu_dialect import GpuSource

    program = kernel.program
    entries = tuple(getattr(kernel, "entries", ())) or tuple(k.name for k in program.kernels)
    spec = GpuKernelSpec(GpuSource(kernel.source, entries, program), kernel.n_inputs, target)
    lib_path = getattr(getattr(kernel, "lib", None), "_name", None)
    return BuildResult(True, lib_path=lib_path, entry=program.name, source=kernel.source, args=args, loader=kind,
                       build_time_s=build_time_s, kernel_target=target, payload=spec)


# ---------------------------------------------------------------------------- runner worker side
def load_kernel(build: BuildResult, num_threads: int | None) -> LoadedKernel:
    """Rebuild the kernel of `build` in this process, by its loader kind."""
    try:
        loader = LOADERS[build.loader]
    except KeyError:
        raise ValueError(f"unknown kernel loader {build.loader!r}; known: {', '.join(LOADERS)}") from None
    return loader(build, num_threads)


@dataclass
class _HostLaunch:
    """CPU kernels write into the bound numpy arrays directly."""

    call: Callable[[list[np.ndarray]], None]
    arrays: list[np.ndarray]
    outs: list[np.ndarray]

    def run(self) -> None:
        self.call(self.arrays)

    def outputs(self) -> list[np.ndarray]:
        return self.outs


@dataclass
class _HostKernel:
    call: Callable[[list[np.ndarray]], None]  # every argument array: inputs, then outputs

    def bind(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> Launch:
        return _HostLaunch(self.call, [*inputs, *outputs], outputs)


def _load_runtime(build: BuildResult, num_threads: int | None) -> LoadedKernel:
    from tilegraph.runtime.kernel import Kernel

    kernel = Kernel(build.lib_path, build.entry, build.input_buffers, build.output_buffers, build.source or "",
                    build.kernel_target)
    n_in = len(build.input_buffers)
    return _HostKernel(lambda arrays: kernel(*arrays[:n_in], out=tuple(arrays[n_in:]), num_threads=num_threads))


def _load_raw(build: BuildResult, num_threads: int | None) -> LoadedKernel:
    fn = getattr(ctypes.CDLL(str(build.lib_path)), str(build.entry))
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * len(build.args)
    return _HostKernel(lambda arrays: fn(*[a.ctypes.data for a in arrays]))


def _gpu_spec(build: BuildResult) -> GpuKernelSpec:
    if not isinstance(build.payload, GpuKernelSpec):
        raise ValueError(f"a {build.loader} BuildResult needs a GpuKernelSpec payload, got {type(build.payload).__name__}")
    return build.payload


# OpenCL --------------------------------------------------------------------
@dataclass
class _OpenCLLaunch:
    kernel: Any  # runtime.opencl.OpenCLKernel
    queue: Any
    buffers: dict[str, Any]
    outs: list[np.ndarray]

    def run(self) -> None:
        self.kernel._launch_all(self.queue, self.buffers)
        self.queue.finish()

    def outputs(self) -> list[np.ndarray]:
        import pyopencl as cl

        for b, host in zip(self.kernel.outputs, self.outs):
            cl.enqueue_copy(self.queue, host, self.buffers[b.name])
        self.queue.finish()
        return self.outs


@dataclass
class _OpenCLKernel:
    kernel: Any

    def bind(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> Launch:
        import pyopencl as cl

        from tilegraph.runtime.opencl import _context

        ctx, queue = _context()
        mf = cl.mem_flags
        program = self.kernel.program
        _check_sizes(program.params, [*inputs, *outputs])
        buffers: dict[str, Any] = {}
        for b, a in zip(self.kernel.inputs, inputs):
            buffers[b.name] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        for b, a in zip(self.kernel.outputs, outputs):  # the poison travels to the device
            buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a)
        for b in program.temporaries:
            buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE, size=max(1, b.size * b.dtype.itemsize))
        return _OpenCLLaunch(self.kernel, queue, buffers, outputs)


def _load_opencl(build: BuildResult, num_threads: int | None) -> LoadedKernel:
    from tilegraph.runtime.opencl import OpenCLKernel

    spec = _gpu_spec(build)
    return _OpenCLKernel(OpenCLKernel(spec.source.program, spec.source, spec.n_inputs))


# CUDA ----------------------------------------------------------------------
@dataclass
class _CudaDeviceLaunch:
    kernel: Any  # runtime.cuda.CudaKernel
    inputs: list[Any]  # torch CUDA tensors
    outs: list[Any]

    def run(self) -> None:
        import torch

        self.kernel(*self.inputs, out=tuple(self.outs))
        torch.cuda.synchronize()

    def outputs(self) -> list[np.ndarray]:
        return [t.cpu().numpy() for t in self.outs]


@dataclass
class _CudaHostLaunch:
    """No torch: run_host copies in and out each run, so times include the transfers."""

    kernel: Any
    inputs: list[np.ndarray]
    outs: list[np.ndarray]

    def run(self) -> None:
        result = self.kernel(*self.inputs)
        produced = result if isinstance(result, tuple) else (result,)
        for dst, src in zip(self.outs, produced):
            np.copyto(dst, np.asarray(src).reshape(dst.shape))

    def outputs(self) -> list[np.ndarray]:
        return self.outs


@dataclass
class _CudaKernel:
    kernel: Any

    def bind(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> Launch:
        _check_sizes(self.kernel.program.params, [*inputs, *outputs])
        torch = _torch_cuda()
        if torch is None:
            return _CudaHostLaunch(self.kernel, inputs, outputs)
        to_device = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in (*inputs, *outputs)]
        return _CudaDeviceLaunch(self.kernel, to_device[:len(inputs)], to_device[len(inputs):])


def _torch_cuda() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _load_cuda(build: BuildResult, num_threads: int | None) -> LoadedKernel:
    from tilegraph.runtime.cuda import CudaKernel

    spec = _gpu_spec(build)
    return _CudaKernel(CudaKernel(spec.source.program, spec.source, spec.n_inputs, spec.target))


def _check_sizes(params: Sequence[Any], arrays: Sequence[np.ndarray]) -> None:
    """No array of the wrong size or dtype reaches a device buffer."""
    if len(params) != len(arrays):
        raise ValueError(f"the kernel takes {len(params)} arrays, got {len(arrays)}")
    for b, a in zip(params, arrays):
        if a.size != b.size or a.dtype != np.dtype(b.dtype.numpy) or not a.flags.c_contiguous:
            raise ValueError(f"argument {b.name}: expected {b.size} contiguous {b.dtype} elements, "
                             f"got shape {a.shape} of {a.dtype}")


LOADERS: dict[str, Callable[[BuildResult, int | None], LoadedKernel]] = {
    "runtime": _load_runtime, "raw": _load_raw, "opencl": _load_opencl, "cuda": _load_cuda,
}

__all__ = ["LOADERS", "GpuKernelSpec", "Launch", "LoadedKernel", "describe_kernel", "load_kernel"]
