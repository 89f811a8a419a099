"""CUDA C printer: the kernels of a GpuProgram plus a host launcher, in one .cu translation unit.

    src = codegen_cuda(lower_gpu(sch.func, Target("cuda")))
    src.code        compiled by nvcc -arch=sm_XX --shared into one .so (runtime/cuda.py)

Exported C entry points (<name> is the sanitised program name):

    int <name>_launch(T0* p0, ..., cudaStream_t stream)   device pointers; allocates temporaries,
                                                           launches every kernel, returns cudaError_t
    int <name>_launch_tmp(T0* p0, ..., U0* t0, ..., cudaStream_t stream)
                                                           the same with the caller's temporaries
                                                           (program.temporaries, in order): no
                                                           allocation (cudaFree synchronises the device)
    int <name>_run_host(T0* p0, ..., int32_t n_inputs)     host pointers: copies inputs in, runs,
                                                           copies outputs (params from n_inputs on) out
    int <name>_time(T0* p0, ..., int32_t reps, float* ms)  device pointers; average ms per run (events)
"""

from __future__ import annotations

from tilegraph.codegen.c import storage_ctype
from tilegraph.codegen.gpu_dialect import CUDA, GpuSource, print_kernels
from tilegraph.codegen.names import NameTable
from tilegraph.codegen.writer import CodeWriter
from tilegraph.lower.gpu.split_host_device import GpuProgram

OOM = "return (int)cudaErrorMemoryAllocation;"


def entry_names(program: GpuProgram) -> dict[str, str]:
    base = NameTable().get("func", program.name)
    return {"launch": f"{base}_launch", "launch_tmp": f"{base}_launch_tmp", "run_host": f"{base}_run_host",
            "time": f"{base}_time"}


def codegen_cuda(program: GpuProgram) -> GpuSource:
    code, entries = print_kernels(program, CUDA)
    return GpuSource(code + "\n" + _host(program, entries), entries, program)


def _host(program: GpuProgram, entries: tuple[str, ...]) -> str:
    names = NameTable()
    w = CodeWriter()
    w.raw("#include <cuda_runtime.h>")
    e = entry_names(program)
    p = [names.get("buffer", b.name) for b in program.params]
    typed = [f"{storage_ctype(b.dtype)}* {n}" for b, n in zip(program.params, p)]
    temps = [names.get("buffer", b.name) for b in program.temporaries]
    typed_temps = [f"{storage_ctype(b.dtype)}* {t}" for b, t in zip(program.temporaries, temps)]
    with w.block(f'extern "C" int {e["launch_tmp"]}({", ".join([*typed, *typed_temps, "cudaStream_t stream"])})'):
        by_name = {b.name: n for b, n in zip([*program.params, *program.temporaries], [*p, *temps])}
        for k, entry in zip(program.kernels, entries):
            args = ", ".join(by_name[b.name] for b in k.func.params)
            grid, block = ", ".join(map(str, k.grid)), ", ".join(map(str, k.block))
            w.line(f"{entry}<<<dim3({grid}), dim3({block}), 0, stream>>>({args});")
        w.line("return (int)cudaGetLastError();")
    with w.block(f'extern "C" int {e["launch"]}({", ".join([*typed, "cudaStream_t stream"])})'):
        for b, t in zip(program.temporaries, temps):
            w.line(f"{storage_ctype(b.dtype)}* {t} = 0;")
            w.line(f"if (cudaMalloc((void**)&{t}, {b.size} * sizeof({storage_ctype(b.dtype)})) != cudaSuccess) {OOM}")
        w.line(f"int err = {e['launch_tmp']}({', '.join([*p, *temps, 'stream'])});")
        for t in temps:
            w.line(f"cudaFree({t});")
        w.line("return err;")
    with w.block(f'extern "C" int {e["run_host"]}({", ".join([*typed, "int32_t n_inputs"])})'):
        dev = [f"d_{n}" for n in p]
        for b, d in zip(program.params, dev):
            t = storage_ctype(b.dtype)
            w.line(f"{t}* {d} = 0;")
            w.line(f"if (cudaMalloc((void**)&{d}, {b.size} * sizeof({t})) != cudaSuccess) {OOM}")
        for i, (b, n, d) in enumerate(zip(program.params, p, dev)):
            size = f"{b.size} * sizeof({storage_ctype(b.dtype)})"
            w.line(f"if ({i} < n_inputs) cudaMemcpy({d}, {n}, {size}, cudaMemcpyHostToDevice);")
        w.line(f"int err = {e['launch']}({', '.join([*dev, '0'])});")
        w.line("if (err == 0) err = (int)cudaDeviceSynchronize();")
        for i, (b, n, d) in enumerate(zip(program.params, p, dev)):
            size = f"{b.size} * sizeof({storage_ctype(b.dtype)})"
            w.line(f"if (err == 0 && {i} >= n_inputs) err = (int)cudaMemcpy({n}, {d}, {size}, cudaMemcpyDeviceToHost);")
        for d in dev:
            w.line(f"cudaFree({d});")
        w.line("return err;")
    with w.block(f'extern "C" int {e["time"]}({", ".join([*typed, "int32_t reps", "float* ms"])})'):
        w.line("cudaEvent_t start, stop;")
        w.line("cudaEventCreate(&start); cudaEventCreate(&stop);")
        w.line(f"int err = {e['launch']}({', '.join([*p, '0'])});")
        w.line("cudaEventRecord(start, 0);")
        with w.block("for (int32_t r = 0; r < reps && err == 0; ++r)"):
            w.line(f"err = {e['launch']}({', '.join([*p, '0'])});")
        w.line("cudaEventRecord(stop, 0);")
        w.line("cudaEventSynchronize(stop);")
        w.line("float total = 0.0f;")
        w.line("cudaEventElapsedTime(&total, start, stop);")
        w.line("*ms = reps > 0 ? total / reps : 0.0f;")
        w.line("cudaEventDestroy(start); cudaEventDestroy(stop);")
        w.line("return err;")
    return w.text()


__all__ = ["codegen_cuda", "entry_names"]
