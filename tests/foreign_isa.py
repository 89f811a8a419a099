"""Kernels for an ISA this host cannot run: `tg.build` refuses them (runtime.Kernel checks the host
first), so a test of every ISA compiles them only where they cannot run."""

from pathlib import Path

from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.lower.pipeline import lower


def compile_only(sch, target) -> tuple[str, Path]:
    """(entry, library path) of `sch` lowered, printed and compiled for `target`, not loaded."""
    src = codegen_c(lower(sch.func, target))
    return src.entry, compile_c(src.code, target, name=src.entry)
