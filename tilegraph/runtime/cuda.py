"""Compile a CUDA GpuProgram with nvcc and run it through ctypes.

    src = codegen_cuda(program)
    path = compile_cuda(src.code, target)                  # nvcc -O3 -arch=sm_XX --shared -> .so (cached)
    check_cuda_syntax(src.code, target)                     # nvcc -c only: no GPU needed
    kernel = CudaKernel(program, src, n_inputs=2, target=target)
    c = kernel(a, b)        numpy arrays: copied in and out by <name>_run_host
    kernel(a, b, out=c)     torch/cupy arrays (DLPack, on the GPU): device pointers, no copies
    kernel.time(a, b)       seconds per run measured with CUDA events

The compiled library caches under $TILEGRAPH_CACHE_DIR (or ~/.cache/tilegraph)/cuda/<sha256>.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.codegen.cuda import entry_names
from tilegraph.codegen.gpu_dialect import GpuSource
from tilegraph.errors import BuildError
from tilegraph.lower.gpu.split_host_device import GpuProgram

NVCC_TIMEOUT_S = 300
QUIET = ("-diag-suppress", "177")


def _nvcc(target: Any) -> str:
    cc = getattr(target, "cc", None) or "nvcc"
    return cc


def _arch(target: Any) -> str:
    capability = getattr(target, "compute_capability", None) or "7.0"
    return f"-arch=sm_{capability.replace('.', '')}"


def _run(cmd: list[str], source_path: Path) -> None:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise BuildError(f"nvcc not found ({cmd[0]}); install the CUDA toolkit or set Target(cc=...)") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"nvcc timed out after {NVCC_TIMEOUT_S} s", str(source_path)) from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()[:40]
        raise BuildError("nvcc failed:\n" + "\n".join(lines), str(source_path))


def check_cuda_syntax(code: str, target: Any) -> None:
    """Compile to an object file only (catches syntax and type errors without a GPU)."""
    with tempfile.TemporaryDirectory(prefix="tg_nvcc_") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(code)
        _run([_nvcc(target), "-c", _arch(target), *QUIET, str(src), "-o", str(Path(tmp) / "kernel.o")], src)


def cache_dir() -> Path:
    root = os.environ.get("TILEGRAPH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tilegraph")
    return Path(root) / "cuda"


def compile_cuda(code: str, target: Any) -> Path:
    """The path of a shared library built from `code` (reused when already built)."""
    key = hashlib.sha256("\n".join([code, _nvcc(target), _arch(target)]).encode()).hexdigest()
    folder = cache_dir() / key
    lib = folder / "kernel.so"
    if lib.exists():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "kernel.cu"
    src.write_text(code)
    tmp = folder / f"kernel.{os.getpid()}.so"
    _run([_nvcc(target), "-O3", _arch(target), "--shared", "-Xcompiler", "-fPIC", *QUIET, str(src), "-o", str(tmp)], src)
    os.replace(tmp, lib)
    return lib


def _device_pointer(x: Any) -> int | None:
    """The device address of a torch/cupy GPU array, else None."""
    ptr = getattr(x, "data_ptr", None)
    if callable(ptr) and getattr(getattr(x, "device", None), "type", None) == "cuda":
        return int(ptr())
    data = getattr(x, "data", None)
    if data is not None and hasattr(data, "ptr") and hasattr(x, "__dlpack__"):
        return int(data.ptr)
    return None


class CudaKernel:
    def __init__(self, program: GpuProgram, source: GpuSource, n_inputs: int, target: Any):
        self.program = program
        self.source = source.code
        self.n_inputs = n_inputs
        self.lib = ctypes.CDLL(str(compile_cuda(source.code, target)))
        names = entry_names(program)
        self._launch = getattr(self.lib, names["launch"])
        self._run_host = getattr(self.lib, names["run_host"])
        self._time = getattr(self.lib, names["time"])
        for fn in (self._launch, self._run_host, self._time):
            fn.restype = ctypes.c_int

    @property
    def outputs(self) -> tuple:
        return self.program.params[self.n_inputs:]

    def _shape(self, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.program.attrs.get("shapes", {}).get(name, default))

    def __call__(self, *arrays: Any, out: Any = None) -> Any:
        if len(arrays) != self.n_inputs:
            raise ValueError(f"{self.program.name} takes {self.n_inputs} input array(s), got {len(arrays)}")
        if all(_device_pointer(a) is not None for a in arrays) and out is not None:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            ptrs = [ctypes.c_void_p(_device_pointer(x)) for x in (*arrays, *outs)]
            err = self._launch(*ptrs, ctypes.c_void_p(0))
            if err:
                raise RuntimeError(f"{self.program.name}: CUDA error {err}")
            return out
        host_in = []
        for b, a in zip(self.program.params, arrays):
            a = np.ascontiguousarray(a)
            if a.dtype != b.dtype.numpy or a.size != b.size:
                raise ValueError(f"input {b.name}: expected {b.size} elements of {b.dtype}, got {a.shape} of {a.dtype}")
            host_in.append(a)
        host_out = [np.full(b.size, np.nan, dtype=b.dtype.numpy) for b in self.outputs]
        ptrs = [x.ctypes.data_as(ctypes.c_void_p) for x in (*host_in, *host_out)]
        err = self._run_host(*ptrs, ctypes.c_int32(self.n_inputs))
        if err:
            raise RuntimeError(f"{self.program.name}: CUDA error {err}")
        shaped = tuple(o.reshape(self._shape(b.name, b.shape)) for o, b in zip(host_out, self.outputs))
        return shaped[0] if len(shaped) == 1 else shaped

    def time(self, *device_arrays: Any, reps: int = 20) -> float:
        """Seconds per run on device arrays (inputs then outputs), CUDA-event timed."""
        ptrs = [ctypes.c_void_p(_device_pointer(x)) for x in device_arrays]
        ms = ctypes.c_float(0.0)
        err = self._time(*ptrs, ctypes.c_int32(reps), ctypes.byref(ms))
        if err:
            raise RuntimeError(f"{self.program.name}: CUDA error {err}")
        return ms.value / 1e3


__all__ = ["CudaKernel", "check_cuda_syntax", "compile_cuda"]
