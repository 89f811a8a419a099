"""Kernels for another CPU architecture (aarch64 on an x86 host), run under an emulator.

    kernel = tg.build(wl, tg.Target("cpu", arch="aarch64"))    # cross-compiled, then
    c = kernel(a, b)                                            # run under qemu-aarch64: correct, not fast

The kernel's C source gets a small `main` (the harness below) and is cross-compiled into a program
(build/compile.py: compile_executable, cached). A run writes every argument to a file, runs the
program under the emulator, which reads them, calls the kernel and writes the outputs back, and
reads the outputs. The same protocol runs the program on a real board later (copy it, run it, copy
the files back). Timings under an emulator mean nothing: `time()` refuses, and tg.tune refuses a
target whose kernels cannot be timed here.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.build.compile import compile_executable
from tilegraph.errors import ResourceError, TilegraphError, shorten
from tilegraph.runtime.launch import KernelBase, check_flat_arrays
from tilegraph.runtime.timer import TimingResult
from tilegraph.target import Target
from tilegraph.te.buffer import Buffer

# architecture -> (user-mode emulator, the sysroot its dynamic loader and libraries come from)
EMULATORS = {"aarch64": ("qemu-aarch64", "/usr/aarch64-linux-gnu")}
RUN_TIMEOUT_S = 300.0


class EmulatorTimeout(TilegraphError, TimeoutError):
    """A program ran past RUN_TIMEOUT_S under the emulator (it was killed)."""


def emulator_command(target: Target) -> list[str]:
    """The command prefix that runs a program of `target.arch` here; ResourceError when none is installed."""
    emulator, sysroot = EMULATORS.get(str(target.arch), (None, None))
    path = shutil.which(emulator) if emulator else None
    if path is None or sysroot is None:
        raise ResourceError(f"no emulator for {target.arch} programs here (install qemu-user and the "
                            f"{target.arch} cross toolchain: scripts/setup.sh does)")
    return [path, "-L", sysroot]


def harness(entry: str, params: Sequence[Buffer]) -> str:
    """C `main` for a kernel: argv[1] the thread count, then one file per parameter (inputs read,
    outputs read for their poison and written back), in the kernel's parameter order."""
    sizes = [b.size * b.dtype.itemsize for b in params]
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "static int tg_io(const char* path, void* data, size_t n, int write) {",
        "  FILE* f = fopen(path, write ? \"wb\" : \"rb\");",
        "  if (!f) return 1;",
        "  size_t done = write ? fwrite(data, 1, n, f) : fread(data, 1, n, f);",
        "  return fclose(f) != 0 || done != n;",
        "}",
        "int main(int argc, char** argv) {",
        f"  if (argc != {2 + len(params)}) {{ fprintf(stderr, \"expected {1 + len(params)} arguments\\n\"); return 2; }}",
        "  int32_t threads = (int32_t)atoi(argv[1]);",
    ]
    for n, size in enumerate(sizes):
        lines.append(f"  void* p{n} = aligned_alloc(64, ({max(size, 1)} + 63) / 64 * 64);")
        lines.append(f"  if (!p{n} || tg_io(argv[{2 + n}], p{n}, {size}, 0)) {{ fprintf(stderr, \"cannot read argument "
                     f"{n}\\n\"); return 3; }}")
    lines.append(f"  {entry}({', '.join(f'p{n}' for n in range(len(params)))}, threads);")
    for n, size in enumerate(sizes):
        lines.append(f"  if (tg_io(argv[{2 + n}], p{n}, {size}, 1)) {{ fprintf(stderr, \"cannot write argument {n}\\n\"); "
                     "return 4; }")
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


class _EmulatedLaunch:
    """One run: files out, the program under the emulator, files back."""

    def __init__(self, kernel: EmulatedKernel, arrays: list[np.ndarray], outs: list[np.ndarray], threads: int):
        self.kernel, self.arrays, self.outs, self.threads = kernel, arrays, outs, threads

    def run(self) -> None:
        k = self.kernel
        with tempfile.TemporaryDirectory(prefix="tg_emulated_") as tmp:
            paths = [Path(tmp) / f"arg{n}.bin" for n in range(len(self.arrays))]
            for path, array in zip(paths, self.arrays):
                np.ascontiguousarray(array).tofile(path)
            command = [*k.emulator, str(k.program), str(self.threads), *map(str, paths)]
            try:
                result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise EmulatorTimeout(f"{k.entry} ran longer than {RUN_TIMEOUT_S:g} s under {k.emulator[0]}") from None
            if result.returncode != 0:
                why = f"signal {-result.returncode}" if result.returncode < 0 else f"exit code {result.returncode}"
                raise TilegraphError(f"{k.entry} failed under {Path(k.emulator[0]).name} ({why}): "
                                     f"{shorten(result.stderr.strip(), 200)}")
            for path, out in zip(paths[len(k.inputs):], self.outs):
                np.copyto(out, np.fromfile(path, dtype=out.dtype).reshape(out.shape))

    def outputs(self) -> list[np.ndarray]:
        return self.outs


class EmulatedKernel(KernelBase):
    """The kernel protocol (runtime/launch.py) for a CPU kernel of another architecture."""

    def __init__(self, code: str, entry: str, inputs: Sequence[Buffer], outputs: Sequence[Buffer], target: Target,
                 lowered: Any = None):
        self.entry = entry
        self.source = code
        self.target = target
        self.lowered = lowered
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.emulator = emulator_command(target)
        self.program = compile_executable(code + "\n" + harness(entry, (*self.inputs, *self.outputs)), target,
                                          name=entry)

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> _EmulatedLaunch:
        check_flat_arrays(self.inputs, list(inputs), "input")
        check_flat_arrays(self.outputs, list(outputs), "output")
        for b, a in zip((*self.inputs, *self.outputs), (*inputs, *outputs)):
            if a.shape != tuple(b.shape):
                raise ValueError(f"argument {b.name!r} has shape {a.shape}, expected {tuple(b.shape)}")
        threads = num_threads if num_threads is not None else int(self.target.num_cores or 1)
        return _EmulatedLaunch(self, [*inputs, *outputs], list(outputs), threads)

    def time(self, *inputs: np.ndarray, **options: Any) -> TimingResult:
        raise ResourceError(f"{self.entry} runs under {Path(self.emulator[0]).name}: its timings mean nothing; "
                            f"time it on an {self.target.arch} machine")


__all__ = ["EMULATORS", "EmulatedKernel", "EmulatorTimeout", "emulator_command", "harness"]
