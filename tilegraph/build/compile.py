"""compile_c / compile_cuda: source -> a cached shared library, one content-addressed cache for both.

    compile_c(source, target)            first call: gcc in a private folder, published atomically
        -> ~/.cache/tilegraph/build/<sha256>/kernel.so
    compile_c(source, target)            later calls: the manifest's hash matches, gcc is not run
    compile_c(source, target, thread_pool=True)   a kernel: its OpenMP loops on tilegraph's pool
                                         (the pool's shim, an object compiled once, linked in)
    compile_cuda(source, target)         the same with nvcc and the cuda Target's flags (-arch=sm_XX ...)
    compile_executable(source, target)   a program (kernel + main) for a cpu target of another
                                         architecture, run under an emulator (runtime/emulated.py);
                                         cached under the same file name as libraries
    check_cuda_syntax(source, target)    nvcc -c only: catches errors without a GPU, caches nothing

The key covers the target kind, the source, the flags, the compiler and its version, and
CODEGEN_VERSION (plus the CPU model when the flags say -march=native, whose output depends on the
machine). A cached library is used only when its manifest's hash matches the file (build/cache.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tilegraph import config
from tilegraph.build.cache import LIBRARY_FILE, SOURCE_FILE, BuildCache, cache_key
from tilegraph.build.toolchain import (
    DEFAULT_TIMEOUT_S,
    CompilerFailed,
    compile_command,
    cuda_compile_command,
    executable_command,
    object_command,
    resolve_compiler,
    run_compiler,
)
from tilegraph.codegen.thread_pool_abi import shim_source
from tilegraph.errors import BuildError
from tilegraph.target import Target
from tilegraph.version import CODEGEN_VERSION

NVCC_TIMEOUT_S = 300.0


def build_cache() -> BuildCache:
    return BuildCache(config.cache_dir() / "build")


def compile_c(source: str, target: Target, name: str = "kernel", timeout: float = DEFAULT_TIMEOUT_S,
              thread_pool: bool = False) -> Path:
    """Compile C `source` for a cpu `target` into a shared library and return its path.
    `thread_pool=True` (kernels) links the thread pool's shim, so the library's OpenMP loops run
    on tilegraph's pool once it is installed (codegen/thread_pool_abi.py).
    Raises BuildError when the compiler is missing, fails (stderr in the message, the source
    kept at `err.source_path`) or runs longer than `timeout` seconds."""
    _check_arguments(source, target, "cpu", "compile_c")
    if not thread_pool:
        return _compile(source, target, name, timeout, compile_command)
    shim = _compile(shim_source(), target, "thread_pool_shim", timeout, object_command, artifact="object")

    def with_shim(cc: str, cflags: Sequence[str], source_path: Path, output: Path) -> list[str]:
        command = compile_command(cc, cflags, source_path, output)
        return [*command[:-1], str(shim), command[-1]]  # the shim's object before the libraries

    return _compile(source, target, name, timeout, with_shim, extra_key={"thread_pool_shim": shim_source()})


def compile_cuda(source: str, target: Target, name: str = "kernel", timeout: float = NVCC_TIMEOUT_S) -> Path:
    """Compile CUDA `source` (kernels plus the host launcher) for a cuda `target` with nvcc."""
    _check_arguments(source, target, "cuda", "compile_cuda")
    return _compile(source, target, name, timeout, cuda_compile_command)


def compile_executable(source: str, target: Target, name: str = "kernel", timeout: float = DEFAULT_TIMEOUT_S) -> Path:
    """Compile a C program (a kernel plus its `main`) for a cpu `target`, typically of another
    architecture, with the target's (cross) compiler; cached like the libraries."""
    _check_arguments(source, target, "cpu", "compile_executable")
    return _compile(source, target, name, timeout, executable_command, artifact="executable")


def check_cuda_syntax(source: str, target: Target, timeout: float = NVCC_TIMEOUT_S) -> None:
    """nvcc -c: syntax and type errors of CUDA `source` as a BuildError, without a GPU."""
    _check_arguments(source, target, "cuda", "check_cuda_syntax")
    nvcc = resolve_compiler(target.cc or "nvcc")
    arch = [f for f in target.cflags if f.startswith("-arch")]
    with tempfile.TemporaryDirectory(prefix="tg_nvcc_") as tmp:
        path = Path(tmp) / SOURCE_FILE
        path.write_text(source, encoding="utf-8")
        try:
            run_compiler(cuda_compile_command(nvcc, ["-c", *arch], path, Path(tmp) / "kernel.o"), timeout)
        except CompilerFailed as failure:
            raise BuildError(f"CUDA source does not compile: {failure}") from None


def _check_arguments(source: str, target: Target, kind: str, fn: str) -> None:
    if not isinstance(source, str):
        raise TypeError(f"{fn} source must be a str of code, got {type(source).__name__}")
    if not isinstance(target, Target):
        raise TypeError(f"{fn} target must be a tilegraph Target, got {type(target).__name__}")
    if target.kind != kind:
        raise ValueError(f"{fn} builds for {kind} targets; got a {target.kind!r} target")


def _compile(source: str, target: Target, name: str, timeout: float,
             command: Callable[[str, Sequence[str], Path, Path], list[str]], artifact: str = "library",
             extra_key: dict | None = None) -> Path:
    cc = resolve_compiler(target.cc)
    cflags = tuple(target.cflags)
    key_parts = {"kind": target.kind, "source": source, "cflags": cflags, "cc": os.path.basename(cc),
                 "cc_version": target.compiler_version, "codegen_version": CODEGEN_VERSION}
    if target.kind == "cpu":
        del key_parts["kind"]  # keys of C libraries built before CUDA joined the cache stay valid
    if artifact != "library":
        key_parts["artifact"] = artifact
    key_parts.update(extra_key or {})
    if any("native" in flag for flag in cflags):
        key_parts["host"] = [target.arch, target.cpu_model]
    key = cache_key(key_parts)

    cache = build_cache()
    cached = cache.lookup(key)
    if cached is not None:
        return cached

    workdir = cache.new_workdir(key)
    source_path = workdir / SOURCE_FILE
    source_path.write_text(source, encoding="utf-8")
    try:
        run_compiler(command(cc, cflags, source_path, workdir / LIBRARY_FILE), timeout)
    except CompilerFailed as failure:
        shutil.rmtree(workdir, ignore_errors=True)
        kept = _keep_failed_source(cache, key, source)
        raise BuildError(f"compiling {name!r}: {failure}", source_path=str(kept)) from None
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    manifest = {"name": name, "kind": target.kind, "cc": cc, "cc_version": target.compiler_version, "cflags": list(cflags),
                "codegen_version": CODEGEN_VERSION, "created": time.time()}
    return cache.publish(workdir, key, manifest)


def _keep_failed_source(cache: BuildCache, key: str, source: str) -> Path:
    """Failed sources stay under <root>/failed/<key>/kernel.c for inspection."""
    folder = cache.root / "failed" / key
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SOURCE_FILE
    temporary = folder / f".{SOURCE_FILE}.{os.getpid()}"
    temporary.write_text(source, encoding="utf-8")
    os.replace(temporary, path)
    return path
