"""The lowering pipeline: scheduled loop IR -> flat IR the printers print without deciding.

    lowered = lower(sch.func, Target("cpu"))            # TILEGRAPH_DUMP_IR=1 prints each step
    lowered = lower(sch.func, target, dump=True)

PASSES is the ordered list of (name, run); each pass lives in lower/passes/<name>.py and is a
pure `run(func, target) -> Func`. After each pass the verifier (tilegraph.loop.verify) runs
when that module exists.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from tilegraph.loop.ir import Func
from tilegraph.loop.printer import func_str
from tilegraph.lower.passes import (
    check_printable,
    expand_unroll,
    flatten_buffers,
    hoist_reduction_init,
    lower_blocks,
    lower_vectorize,
    promote_registers,
    simplify,
)

DUMP_ENV = "TILEGRAPH_DUMP_IR"
Pass = Callable[[Func, object], Func]


def _optional_pass(module: str) -> Pass | None:
    """A pass written elsewhere that may not exist yet; skipped when absent."""
    try:
        return importlib.import_module(module).run  # type: ignore[no-any-return]
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        return None


def _passes() -> list[tuple[str, Pass]]:
    out: list[tuple[str, Pass]] = []
    compact = _optional_pass("tilegraph.lower.passes.compact_buffers")
    if compact is not None:
        out.append(("compact_buffers", compact))
    out += [
        ("hoist_reduction_init", hoist_reduction_init.run),
        ("lower_blocks", lower_blocks.run),
        ("simplify", simplify.run),
        ("flatten_buffers", flatten_buffers.run),
        ("lower_vectorize", lower_vectorize.run),
        ("expand_unroll", expand_unroll.run),
        ("final_simplify", simplify.run),
        ("promote_registers", promote_registers.run),
        ("check_printable", check_printable.run),
    ]
    return out


PASSES: list[tuple[str, Pass]] = _passes()


def _verifier() -> Callable[[Func], object] | None:
    try:
        module = importlib.import_module("tilegraph.loop.verify")
    except ModuleNotFoundError as err:
        if err.name != "tilegraph.loop.verify":
            raise
        return None
    return getattr(module, "verify", None)


def lower(func: Func, target: object, dump: bool | None = None) -> Func:
    """Run PASSES in order. `dump` (default: env TILEGRAPH_DUMP_IR=1) prints the IR after each."""
    if dump is None:
        dump = os.environ.get(DUMP_ENV, "") not in ("", "0")
    verify = _verifier()
    if dump:
        print(f"# input\n{func_str(func)}")
    for name, run in PASSES:
        func = run(func, target)
        if dump:
            print(f"# after {name}\n{func_str(func)}")
        if verify is not None:
            verify(func)
    return func


__all__ = ["PASSES", "lower"]
