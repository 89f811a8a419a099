"""OpenCL C printer: one program holding every kernel of a GpuProgram.

    src = codegen_opencl(lower_gpu(sch.func, Target("opencl")))
    src.code        OpenCL C source (compiled at run time by the device's driver, e.g. PoCL)
    src.kernels     kernel names in launch order; the host side is runtime/opencl.py

A kernel's parameters are `__global T* restrict` pointers to the global buffers it touches
(program params first, then temporaries), in the order of `kernel.func.params`.
"""

from __future__ import annotations

from tilegraph.codegen.gpu_dialect import OPENCL, GpuSource, print_kernels
from tilegraph.lower.gpu.split_host_device import GpuProgram


def codegen_opencl(program: GpuProgram) -> GpuSource:
    code, entries = print_kernels(program, OPENCL)
    return GpuSource(code, entries, program)


__all__ = ["codegen_opencl"]
