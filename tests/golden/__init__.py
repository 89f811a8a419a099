"""Golden files of generated code: a reviewer sees in a diff what a change did to what we emit.

    python -m tests.golden            # check: exit 1 and a diff per file that changed
    python -m tests.golden --update   # rewrite the files after an intended change; review `git diff`

Each case is a canonical schedule on a fixed Target (never the host's), printed as scheduled loop
IR (`<case>.ir`) and as the source its backend emits (`.c`, `.cu`, `.cl`). tests/codegen/test_golden.py
runs the check in the default suite.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

import tilegraph as tg
from tilegraph import ops, te, workloads
from tilegraph.codegen.c import codegen_c
from tilegraph.codegen.cuda import codegen_cuda
from tilegraph.codegen.opencl import codegen_opencl
from tilegraph.loop.printer import func_str
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.lower.pipeline import lower
from tilegraph.schedule.defaults import default_schedule

FOLDER = Path(__file__).parent
CPU = tg.Target("cpu", isa="avx512", num_cores=2, vector_bits=512, l1d_bytes=48 << 10, l2_bytes=2 << 20,
                l3_bytes=2 << 20, cpu_model="golden", cc="gcc", cc_version="gcc 12")
CPU_AVX2 = tg.Target("cpu", isa="avx2", num_cores=2, vector_bits=256, l1d_bytes=32 << 10, l2_bytes=512 << 10,
                     l3_bytes=4 << 20, cpu_model="golden", cc="gcc", cc_version="gcc 12")
CUDA = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0", cc="nvcc", cc_version="12")
OPENCL = tg.Target("opencl", device_name="golden", num_sms=8, shared_memory_bytes=64 << 10, max_threads_per_block=1024)


def gemm_microkernel() -> tg.Schedule:
    """Packed B panel, register tile of 6 rows, 16-wide vectors, write-back per tile (odd sizes):
    the primitive chain tests/schedule/primitives/test_gemm_microkernel.py checks, made parallel."""
    from tests.schedule.primitives.test_gemm_microkernel import microkernel_schedule

    a, b = te.placeholder((37, 50), name="A"), te.placeholder((50, 64), name="B")
    sch = microkernel_schedule(tg.Workload([a, b], [ops.matmul(a, b, name="C")]))
    sch.parallel(sch.loops("C")[0])
    return sch


def conv2d(target: tg.Target) -> tg.Schedule:
    return default_schedule(workloads.from_spec("conv2d_nhwc:1,9,9,3,8,3,1,1"), target)


def softmax(target: tg.Target) -> tg.Schedule:
    return default_schedule(workloads.from_spec("softmax:5,33"), target)


def gpu_gemm() -> tg.Schedule:
    from tilegraph.tune.gensor.gpu_state import gpu_schedule, gpu_search
    from tilegraph.tune.hardware_gpu import gpu_hardware

    wl = workloads.from_spec("matmul:64,48,32")
    return gpu_schedule(wl, gpu_search(wl, gpu_hardware(CUDA), top_k=1)[0])


def _cpu(make: Callable[[], tg.Schedule], target: tg.Target) -> Callable[[], dict[str, str]]:
    def render() -> dict[str, str]:
        sch = make()
        return {"ir": func_str(sch.func), "c": codegen_c(lower(sch.func, target)).code}
    return render


def _gpu(make: Callable[[], tg.Schedule]) -> Callable[[], dict[str, str]]:
    def render() -> dict[str, str]:
        sch = make()
        return {"ir": func_str(sch.func), "cu": codegen_cuda(lower_gpu(sch.func, CUDA)).code,
                "cl": codegen_opencl(lower_gpu(sch.func, OPENCL)).code}
    return render


CASES: dict[str, Callable[[], dict[str, str]]] = {
    "gemm_microkernel_avx512": _cpu(gemm_microkernel, CPU),
    "conv2d_avx2": _cpu(lambda: conv2d(CPU_AVX2), CPU_AVX2),
    "softmax_avx512": _cpu(lambda: softmax(CPU), CPU),
    "gemm_gpu": _gpu(gpu_gemm),
}


def rendered() -> dict[str, str]:
    """File name -> text, for every case."""
    out = {}
    for case, render in CASES.items():
        for suffix, text in render().items():
            out[f"{case}.{suffix}"] = text if text.endswith("\n") else text + "\n"
    return out


def differences() -> dict[str, str]:
    """File name -> unified diff (stored -> now) for every golden file that differs or is missing."""
    diffs = {}
    for name, text in rendered().items():
        path = FOLDER / name
        stored = path.read_text() if path.exists() else ""
        if stored != text:
            diffs[name] = "".join(difflib.unified_diff(stored.splitlines(True), text.splitlines(True),
                                                       f"tests/golden/{name} (stored)", f"tests/golden/{name} (now)"))
    return diffs


def update() -> list[str]:
    """Rewrite every golden file; returns the names written."""
    written = []
    for name, text in rendered().items():
        path = FOLDER / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(name)
    return written
