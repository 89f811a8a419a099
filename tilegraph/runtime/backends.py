"""Backends: one registration per target kind, so nothing else asks `target.kind == ...`.

    backend = backend_for(target)            # Target -> Backend (a ValueError lists the known kinds)
    kernel = backend.build(schedule, target) # lower -> print -> compile -> load: a kernel of runtime/launch.py
    backend.default_schedule(workload, target)
    require_runnable(target)                 # ResourceError when this machine cannot run its kernels

A Backend names the steps of its kind: its lowering pipeline (lower/ or lower/gpu/), its printer
(codegen/), its compiler (build/; OpenCL compiles at load time), its kernel class (runtime/), the
default schedule (schedule/defaults.py), whether this machine can run it, and the loader a
measurement worker rebuilds its kernels with (tune/kernel_loader.py). Adding a target kind is one
module per layer that needs one, plus one `register(Backend(...))` here; docs/architecture.md walks
through it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.errors import ResourceError
from tilegraph.loop.ir import Func
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.runtime.launch import KernelProtocol
from tilegraph.schedule.defaults import default_gpu_schedule, default_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.stages import stage
from tilegraph.target import Target, gpu_visible, host_arch
from tilegraph.te.workload import Workload


@dataclass(frozen=True)
class Backend:
    kind: str
    build: Callable[[Schedule, Target], KernelProtocol]
    default_schedule: Callable[[Workload, Target], Schedule]
    unavailable: Callable[[], str | None]  # why this machine cannot run its kernels, or None
    loader: str | None                      # tune/kernel_loader.LOADERS key (None: not tuned here)
    is_gpu: bool = False
    needs_compiler: bool = True             # Target.cc must exist (OpenCL compiles in its driver)
    timeable: bool = True                   # False: kernels run here (correctness) but their times mean nothing


BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Make `backend` the one for its target kind (a later registration replaces an earlier one)."""
    BACKENDS[backend.kind] = backend
    return backend


def backend_for(target: Target | str) -> Backend:
    """The backend of a target kind; a cpu Target of another architecture gets "cpu-emulated"."""
    kind = target.kind if isinstance(target, Target) else str(target)
    if isinstance(target, Target) and kind == "cpu" and target.arch not in (None, host_arch()):
        kind = "cpu-emulated"
    try:
        return BACKENDS[kind]
    except KeyError:
        raise ValueError(f"no backend for target kind {kind!r}; registered: {', '.join(sorted(BACKENDS))}") from None


def require_runnable(target: Target, timed: bool = False) -> None:
    """Refuse a target whose kernels cannot run on this machine, or (`timed`, as tuning needs) whose
    runs here cannot be timed; building alone needs only the compiler."""
    backend = backend_for(target)
    reason = backend.unavailable()
    if reason is not None:
        raise ResourceError(reason)
    if timed and not backend.timeable:
        raise ResourceError(f"{target.arch} kernels run here under an emulator, for correctness only; their times mean "
                            f"nothing: time them on an {target.arch} machine (tg.build, kernel(...) and tg.tune, "
                            f"which checks candidates without timing them, work here)")


# ------------------------------------------------------------------------------ cpu
def lower_and_compile_cpu(func: Func, target: Target) -> tuple[str, str, str, Func]:
    """(library path, entry, C source, lowered Func) of a CPU kernel: the part of its build that
    is pure Python and the compiler, every result picklable, so it may run in another process."""
    with stage("lower"):
        lowered = lower(func, target)
    return (*compile_lowered_cpu(lowered, target), lowered)


def compile_lowered_cpu(lowered: Func, target: Target) -> tuple[str, str, str]:
    """(library path, entry, C source) of a lowered CPU function: printed, then compiled."""
    with stage("print"):
        src = codegen_c(lowered)
    with stage("compile"):
        lib = compile_c(src.code, target, name=src.entry, thread_pool=True)
    return str(lib), src.entry, src.code


CpuBuild = Callable[[Func, Target], tuple[str, str, str, Func]]
_cpu_builds: list[CpuBuild] = []  # the innermost `cpu_builds_by` first; empty: in this thread


@contextmanager
def cpu_builds_by(build: CpuBuild) -> Iterator[None]:
    """Inside, every CPU kernel built in this process, on any thread, gets its library through
    `build` (lower_and_compile_cpu's contract; graph/build_workers.py runs it in worker processes:
    lowering is Python, one core at a time in this process). Loading the library stays here."""
    _cpu_builds.insert(0, build)
    try:
        yield
    finally:
        _cpu_builds.remove(build)


def _build_cpu(sch: Schedule, target: Target) -> KernelProtocol:
    build = _cpu_builds[0] if _cpu_builds else lower_and_compile_cpu
    lib, entry, code, lowered = build(sch.func, target)
    n_inputs = len(sch.workload.inputs)
    return Kernel(lib, entry, inputs=sch.func.params[:n_inputs], outputs=sch.func.params[n_inputs:],
                  source=code, target=target, lowered=lowered, dims=sch.workload.dims,
                  dims_limit=dict(sch.workload.dims_at))


def _build_emulated(sch: Schedule, target: Target) -> KernelProtocol:
    from tilegraph.runtime.emulated import EmulatedKernel

    lowered = lower(sch.func, target)
    src = codegen_c(lowered)
    n_inputs = len(sch.workload.inputs)
    return EmulatedKernel(src.code, src.entry, sch.func.params[:n_inputs], sch.func.params[n_inputs:], target, lowered)


def _emulator_unavailable() -> str | None:
    from tilegraph.runtime.emulated import EMULATORS

    missing = [arch for arch, (emulator, _) in EMULATORS.items() if shutil.which(emulator) is None]
    return None if not missing else f"no emulator for {', '.join(missing)} programs (install qemu-user)"


# ------------------------------------------------------------------------------ GPUs
def _build_opencl(sch: Schedule, target: Target) -> KernelProtocol:
    from tilegraph.codegen.opencl import codegen_opencl
    from tilegraph.lower.gpu.pipeline import lower_gpu
    from tilegraph.runtime.opencl import OpenCLKernel

    with stage("lower"):
        program = lower_gpu(sch.func, target)
    with stage("print"):
        source = codegen_opencl(program)
    with stage("compile"):  # the driver compiles at load time: only the program's set-up here
        return OpenCLKernel(program, source, len(sch.workload.inputs), target)


def _build_cuda(sch: Schedule, target: Target) -> KernelProtocol:
    from tilegraph.codegen.cuda import codegen_cuda
    from tilegraph.lower.gpu.pipeline import lower_gpu
    from tilegraph.runtime.cuda import CudaKernel

    with stage("lower"):
        program = lower_gpu(sch.func, target)
    with stage("print"):
        source = codegen_cuda(program)
    with stage("compile"):
        return CudaKernel(program, source, len(sch.workload.inputs), target)


def _opencl_unavailable() -> str | None:
    from tilegraph.runtime.opencl import available  # pyopencl is optional

    return None if available() else "no OpenCL device found (install pyopencl and an OpenCL driver such as PoCL)"


def _cuda_unavailable() -> str | None:
    if gpu_visible():
        return None
    return "no NVIDIA GPU found (nvidia-smi sees none): CUDA kernels can be built here with tg.build, but not run, timed or tuned"


def _gpu_default(wl: Workload, target: Any) -> Schedule:
    return default_gpu_schedule(wl)


register(Backend("cpu", _build_cpu, default_schedule, lambda: None, loader="runtime"))
register(Backend("cpu-emulated", _build_emulated, default_schedule, _emulator_unavailable, loader=None,
                 timeable=False))
register(Backend("opencl", _build_opencl, _gpu_default, _opencl_unavailable, loader="opencl", is_gpu=True,
                 needs_compiler=False))
register(Backend("cuda", _build_cuda, _gpu_default, _cuda_unavailable, loader="cuda", is_gpu=True))

__all__ = ["BACKENDS", "Backend", "backend_for", "compile_lowered_cpu", "cpu_builds_by", "lower_and_compile_cpu", "register",
           "require_runnable"]
