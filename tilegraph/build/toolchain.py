"""Compiler discovery and invocation: turn a missing compiler, a failed compile or a hung one
into a BuildError that says what happened and where the source is.

    resolve_compiler("gcc")                 -> "/usr/bin/gcc"   (or BuildError: how to install it)
    compile_command(cc, flags, "k.c", "k.so") -> [cc, *flags, "-o", "k.so", "k.c", "-lm"]
    cuda_compile_command(nvcc, flags, "k.c", "k.so") -> [nvcc, *flags, ..., "-x", "cu", "-o", "k.so", "k.c"]
    run_compiler(command, timeout)          raises CompilerFailed with the trimmed stderr
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tilegraph.errors import BuildError

DEFAULT_TIMEOUT_S = 120.0
MAX_ERROR_LINES = 40
INSTALL_HINTS = {
    "gcc": "install it (e.g. `apt-get install gcc`) or point TILEGRAPH_CC / Target(cc=...) at a C compiler",
    "nvcc": "install the CUDA toolkit or put nvcc on PATH",
}


def resolve_compiler(cc: str) -> str:
    """The runnable path of `cc` (a name looked up on PATH, or a path)."""
    found = shutil.which(cc)
    if found is None and os.sep in cc and os.path.isfile(cc) and os.access(cc, os.X_OK):
        found = cc
    if found is None:
        base = os.path.basename(cc)
        hint = INSTALL_HINTS.get("nvcc" if base == "nvcc" else "gcc")
        raise BuildError(f"{'CUDA' if base == 'nvcc' else 'C'} compiler {cc!r} not found; {hint}")
    return found


def compile_command(cc: str, cflags: Sequence[str], source: Path | str, output: Path | str) -> list[str]:
    # Libraries go after the source so the linker resolves the source's references to them.
    return [cc, *cflags, "-o", str(output), str(source), "-lm"]


def object_command(cc: str, cflags: Sequence[str], source: Path | str, output: Path | str) -> list[str]:
    """An object file to link into libraries (the thread pool's shim): compiled, not linked."""
    flags = [f for f in cflags if f != "-shared"]
    return [cc, *flags, "-c", "-o", str(output), str(source)]


def executable_command(cc: str, cflags: Sequence[str], source: Path | str, output: Path | str) -> list[str]:
    """A program instead of a shared library: the Target's flags without -shared/-fPIC."""
    flags = [f for f in cflags if f not in ("-shared", "-fPIC")]
    return [cc, *flags, "-o", str(output), str(source), "-lm"]


NVCC_QUIET = ("-diag-suppress", "177")  # "declared but never referenced": unused helper functions


def cuda_compile_command(nvcc: str, flags: Sequence[str], source: Path | str, output: Path | str) -> list[str]:
    """nvcc with the Target's flags; `-x cu` because the cache names every source kernel.c."""
    return [nvcc, *flags, *NVCC_QUIET, "-x", "cu", "-o", str(output), str(source)]


class CompilerFailed(Exception):
    """The compiler ran and failed or hung; the caller turns this into a BuildError with the
    path where it keeps the source."""


def run_compiler(command: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S) -> None:
    """Run `command`. A missing compiler raises BuildError; a failure or timeout CompilerFailed."""
    name = os.path.basename(command[0])
    try:
        # a session of its own: gcc is a driver, and a timeout must stop the cc1 it started too
        # (killing the driver alone left cc1 compiling for minutes, a core taken from every later
        # measurement)
        process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
    except FileNotFoundError:
        hint = INSTALL_HINTS["nvcc" if name == "nvcc" else "gcc"]
        raise BuildError(f"compiler {command[0]!r} not found; {hint}") from None
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise CompilerFailed(f"{name} timed out after {timeout:g} s") from None
    except BaseException:  # interrupted (Ctrl-C): no compiler left behind
        _kill_group(process)
        raise
    if process.returncode != 0:
        raise CompilerFailed(f"{name} failed with exit code {process.returncode}:\n{trim_lines(stderr)}")


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the compiler's whole process group and reap the driver."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.communicate()


def trim_lines(text: str, limit: int = MAX_ERROR_LINES) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) <= limit:
        return "\n".join(lines)
    return "\n".join([*lines[:limit], f"... ({len(lines) - limit} more lines)"])
