"""Printers from lowered loop IR to source code (C with GCC vector extensions and OpenMP).

Printers only print: every decision (vector widths, unrolling, which buffers live in registers)
is taken by the lowering pipeline, so anything a printer meets it can print.
"""

from tilegraph.version import CODEGEN_VERSION  # bumped whenever generated code changes for the same lowered IR

__all__ = ["CODEGEN_VERSION"]
