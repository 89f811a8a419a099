"""compile_c: C source -> a cached shared library.

    compile_c(source, target)            first call: gcc in a private folder, published atomically
        -> ~/.cache/tilegraph/build/<sha256>/kernel.so
    compile_c(source, target)            later calls: the manifest's hash matches, gcc is not run

The key covers the source, the flags, the compiler and its version, and CODEGEN_VERSION (plus the
CPU model when the flags say -march=native, whose output depends on the machine).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tilegraph import config
from tilegraph.build.cache import LIBRARY_FILE, SOURCE_FILE, BuildCache, cache_key
from tilegraph.build.toolchain import (
    DEFAULT_TIMEOUT_S,
    CompilerFailed,
    compile_command,
    resolve_compiler,
    run_compiler,
)
from tilegraph.errors import BuildError
from tilegraph.target import Target


def build_cache() -> BuildCache:
    return BuildCache(config.cache_dir() / "build")


def compile_c(source: str, target: Target, name: str = "kernel", timeout: float = DEFAULT_TIMEOUT_S) -> Path:
    """Compile C `source` for a cpu `target` into a shared library and return its path.
    Raises BuildError when the compiler is missing, fails (stderr in the message, the source
    kept at `err.source_path`) or runs longer than `timeout` seconds."""
    if not isinstance(source, str):
        raise TypeError(f"compile_c source must be a str of C code, got {type(source).__name__}")
    if not isinstance(target, Target):
        raise TypeError(f"compile_c target must be a tilegraph Target, got {type(target).__name__}")
    if target.kind != "cpu":
        raise ValueError(f"compile_c builds C for cpu targets; got a {target.kind!r} target")
    from tilegraph.codegen import CODEGEN_VERSION  # lazily: codegen may import the build package

    cc = resolve_compiler(target.cc)
    cflags = tuple(target.cflags)
    key_parts = {"source": source, "cflags": cflags, "cc": os.path.basename(cc), "cc_version": target.cc_version,
                 "codegen_version": CODEGEN_VERSION}
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
        run_compiler(compile_command(cc, cflags, source_path, workdir / LIBRARY_FILE), timeout)
    except CompilerFailed as failure:
        shutil.rmtree(workdir, ignore_errors=True)
        kept = _keep_failed_source(cache, key, source)
        raise BuildError(f"compiling {name!r}: {failure}", source_path=str(kept)) from None
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    manifest = {"name": name, "cc": cc, "cc_version": target.cc_version, "cflags": list(cflags),
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
