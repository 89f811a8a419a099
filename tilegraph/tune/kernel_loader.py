"""Per-target kernels for measurement: what a build worker ships, and how the runner's worker rebuilds it.

    build = describe_kernel(kernel, target, args, secs)     # build worker: a picklable BuildResult
    kernel = load_kernel(build)                             # runner worker: a kernel of runtime/launch.py
    launch = kernel.bind(inputs, poisoned_outputs, num_threads)
    launch.run(); launch.outputs()                          # check against the reference, then
    measure(launch.run, ...)                                # time exactly as kernel.time() does

Binding arrays and one run are the kernel protocol's (runtime/launch.py); what differs per target
is only how the worker gets the kernel back:

    loader     the worker rebuilds
    runtime    tilegraph.runtime Kernel from the .so (CPU)
    raw        ctypes function from a hand-written .so (tests inject candidates this way)
    opencl     OpenCLKernel from the generated source (contexts cannot cross processes)
    cuda       CudaKernel from the generated source (nvcc's library is in the build cache)
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tilegraph.runtime.backends import backend_for
from tilegraph.runtime.launch import Launch
from tilegraph.tune.result import ArgSpec, BuildResult


class LoadedKernel(Protocol):
    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> Launch:
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
    loader = backend_for(target).loader
    if loader is None:
        raise ValueError(f"kernels for {target} are not measured here (no loader for a measurement worker)")
    if loader == "runtime":
        return BuildResult(True, lib_path=str(kernel.lib_path), entry=str(kernel.entry), source=kernel.source, args=args,
                           loader="runtime", build_time_s=build_time_s, input_buffers=tuple(kernel.inputs),
                           output_buffers=tuple(kernel.outputs), kernel_target=kernel.target)
    from tilegraph.codegen.gpu_dialect import GpuSource

    program = kernel.program
    entries = tuple(getattr(kernel, "entries", ())) or tuple(k.name for k in program.kernels)
    spec = GpuKernelSpec(GpuSource(kernel.source, entries, program), kernel.n_inputs, target)
    lib_path = getattr(getattr(kernel, "lib", None), "_name", None)
    return BuildResult(True, lib_path=lib_path, entry=program.name, source=kernel.source, args=args, loader=loader,
                       build_time_s=build_time_s, kernel_target=target, payload=spec)


# ---------------------------------------------------------------------------- runner worker side
def load_kernel(build: BuildResult) -> LoadedKernel:
    """Rebuild the kernel of `build` in this process, by its loader kind."""
    try:
        loader = LOADERS[build.loader]
    except KeyError:
        raise ValueError(f"unknown kernel loader {build.loader!r}; known: {', '.join(LOADERS)}") from None
    return loader(build)


def _load_runtime(build: BuildResult) -> LoadedKernel:
    from tilegraph.runtime.kernel import Kernel

    return Kernel(build.lib_path, build.entry, build.input_buffers, build.output_buffers, build.source or "",
                  build.kernel_target)


@dataclass
class _RawLaunch:
    fn: Any
    arrays: list[np.ndarray]
    outs: list[np.ndarray]

    def run(self) -> None:
        self.fn(*[a.ctypes.data for a in self.arrays])

    def outputs(self) -> list[np.ndarray]:
        return self.outs


@dataclass
class _RawKernel:
    """A hand-written C function taking one pointer per argument (tests' crashing, hanging or
    wrong candidates)."""

    fn: Any
    args: tuple[Any, ...]

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> Launch:
        arrays = [*inputs, *outputs]
        if len(arrays) != len(self.args):
            raise TypeError(f"the function takes {len(self.args)} arrays, got {len(arrays)}")
        return _RawLaunch(self.fn, arrays, list(outputs))


def _load_raw(build: BuildResult) -> LoadedKernel:
    fn = getattr(ctypes.CDLL(str(build.lib_path)), str(build.entry))
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * len(build.args)
    return _RawKernel(fn, build.args)


def _gpu_spec(build: BuildResult) -> GpuKernelSpec:
    if not isinstance(build.payload, GpuKernelSpec):
        raise ValueError(f"a {build.loader} BuildResult needs a GpuKernelSpec payload, got {type(build.payload).__name__}")
    return build.payload


def _load_opencl(build: BuildResult) -> LoadedKernel:
    from tilegraph.runtime.opencl import OpenCLKernel

    spec = _gpu_spec(build)
    return OpenCLKernel(spec.source.program, spec.source, spec.n_inputs, spec.target)


def _load_cuda(build: BuildResult) -> LoadedKernel:
    from tilegraph.runtime.cuda import CudaKernel

    spec = _gpu_spec(build)
    return CudaKernel(spec.source.program, spec.source, spec.n_inputs, spec.target)


LOADERS: dict[str, Callable[[BuildResult], LoadedKernel]] = {
    "runtime": _load_runtime, "raw": _load_raw, "opencl": _load_opencl, "cuda": _load_cuda,
}

__all__ = ["LOADERS", "GpuKernelSpec", "LoadedKernel", "describe_kernel", "load_kernel"]
