"""Run a CUDA GpuProgram: the library nvcc built (build/compile.py: compile_cuda, cached like C),
called through ctypes. The kernel protocol of runtime/launch.py:

    kernel = CudaKernel(program, codegen_cuda(program), n_inputs=2, target=Target("cuda"))
    c = kernel(a, b)          numpy in, numpy out
    kernel(a, b, out=c)       torch/cupy arrays on the GPU (DLPack): device pointers, no copies
    kernel.time(a, b)         TimingResult: inputs copied to the device once (with torch), each run
                              synchronised; without torch, run_host copies in and out every run
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.build.compile import compile_cuda
from tilegraph.codegen.cuda import entry_names
from tilegraph.codegen.gpu_dialect import GpuSource
from tilegraph.dtype import poisoned
from tilegraph.lower.gpu.split_host_device import GpuProgram
from tilegraph.runtime.launch import KernelBase, check_flat_arrays
from tilegraph.target import Target


def _device_pointer(x: Any) -> int | None:
    """The device address of a torch/cupy GPU array, else None."""
    ptr = getattr(x, "data_ptr", None)
    if callable(ptr) and getattr(getattr(x, "device", None), "type", None) == "cuda":
        return int(ptr())
    data = getattr(x, "data", None)
    if data is not None and hasattr(data, "ptr") and hasattr(x, "__dlpack__"):
        return int(data.ptr)
    return None


def _torch_cuda() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class _DeviceLaunch:
    """torch tensors on the GPU, made once; a run launches and synchronises."""

    def __init__(self, kernel: CudaKernel, arrays: list[Any], outs: list[np.ndarray], torch: Any):
        self.kernel, self.arrays, self.outs, self.torch = kernel, arrays, outs, torch
        self.launch = kernel.bound_launch(arrays)  # pointers read once: timed runs are one foreign call each

    def run(self) -> None:
        self.launch()
        self.torch.cuda.synchronize()

    def outputs(self) -> list[np.ndarray]:
        n = self.kernel.n_inputs
        for host, dev in zip(self.outs, self.arrays[n:]):
            np.copyto(host, dev.cpu().numpy().reshape(host.shape))
        return self.outs


class _HostLaunch:
    """No torch: run_host copies in and out each run, so times include the transfers."""

    def __init__(self, kernel: CudaKernel, inputs: list[np.ndarray], outs: list[np.ndarray]):
        self.kernel, self.inputs, self.outs = kernel, inputs, outs

    def run(self) -> None:
        ptrs = [x.ctypes.data_as(ctypes.c_void_p) for x in (*self.inputs, *self.outs)]
        err = self.kernel._run_host(*ptrs, ctypes.c_int32(self.kernel.n_inputs))
        if err:
            raise RuntimeError(f"{self.kernel.program.name}: CUDA error {err}")

    def outputs(self) -> list[np.ndarray]:
        return self.outs


class CudaKernel(KernelBase):
    """The kernel protocol (runtime/launch.py) for a CUDA program."""

    @property
    def entry(self) -> str:
        """The program's name (a model's kernel list shows it, as a CPU kernel's exported function)."""
        return self.program.name

    def __init__(self, program: GpuProgram, source: GpuSource, n_inputs: int, target: Target):
        self.program = program
        self.source = source.code
        self.n_inputs = n_inputs
        self.target = target
        self.inputs = tuple(program.params[:n_inputs])
        self.outputs = tuple(program.params[n_inputs:])
        self.lib_path = compile_cuda(source.code, target, name=program.name)
        self.lib = ctypes.CDLL(str(self.lib_path))
        names = entry_names(program)
        self._launch_tmp = getattr(self.lib, names["launch_tmp"])
        self._run_host = getattr(self.lib, names["run_host"])
        for fn in (self._launch_tmp, self._run_host):
            fn.restype = ctypes.c_int
        self._temporaries: list[Any] | None = None  # device buffers of a multi-kernel program, made once

    def output_arrays(self, out: Any) -> list[np.ndarray]:
        if out is not None:
            return super().output_arrays(out)
        shapes = self.program.attrs.get("shapes", {})
        return [poisoned(tuple(shapes.get(b.name, b.shape)), b.dtype.array_numpy) for b in self.outputs]

    def __call__(self, *inputs: Any, out: Any = None, num_threads: int | None = None) -> Any:
        if inputs and out is not None and all(_device_pointer(a) is not None for a in inputs):
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            self._launch_device([*inputs, *outs])
            return out
        return super().__call__(*inputs, out=out, num_threads=num_threads)

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> _DeviceLaunch | _HostLaunch:
        inputs = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in inputs]
        check_flat_arrays(self.inputs, inputs, "input")
        check_flat_arrays(self.outputs, outputs, "output")
        torch = _torch_cuda()
        if torch is None:
            return _HostLaunch(self, list(inputs), list(outputs))
        arrays = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in (*inputs, *outputs)]
        return _DeviceLaunch(self, arrays, list(outputs), torch)

    def _launch_device(self, arrays: Sequence[Any]) -> None:
        self.bound_launch(arrays)()

    def bound_launch(self, arrays: Sequence[Any], stream: int = 0) -> Callable[[], None]:
        """A launch on device arrays (torch/cupy) with its pointers read once: one foreign call per
        run, no allocation (a multi-kernel program's temporaries are this kernel's, made at the
        first launch; one kernel object runs one launch at a time, as a model's lock ensures)."""
        if len(arrays) != len(self.program.params):
            raise TypeError(f"{self.program.name} takes {len(self.program.params)} device arrays, got {len(arrays)}")
        pointers = [_device_pointer(x) for x in arrays]
        if any(p is None for p in pointers):
            raise TypeError(f"{self.program.name}: every argument of a device launch must be a CUDA array")
        args = (*(ctypes.c_void_p(p) for p in pointers), *(ctypes.c_void_p(p) for p in self._temporary_pointers()),
                ctypes.c_void_p(stream))
        launch, name = self._launch_tmp, self.program.name

        def run() -> None:
            err = launch(*args)
            if err:
                raise RuntimeError(f"{name}: CUDA error {err}")

        return run

    def _temporary_pointers(self) -> list[int]:
        if not self.program.temporaries:
            return []
        if self._temporaries is None:
            torch = _torch_cuda()
            if torch is None:
                raise RuntimeError(f"{self.program.name}: its temporaries live in torch's CUDA memory; torch with CUDA "
                                   "is not available")
            self._temporaries = [torch.empty(max(1, b.size), dtype=getattr(torch, b.dtype.numpy.name), device="cuda")
                                 for b in self.program.temporaries]
        return [t.data_ptr() for t in self._temporaries]


__all__ = ["CudaKernel"]
