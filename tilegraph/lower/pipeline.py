"""The lowering pipeline: scheduled loop IR -> flat IR the printers print without deciding.

    lowered = lower(sch.func, Target("cpu"))            # TILEGRAPH_DUMP_IR=1 prints each step
    lowered = lower(sch.func, target, dump=True)

PASSES is the ordered list of (name, run); each pass lives in lower/passes/<name>.py and is a
pure `run(func, target) -> Func`. After each pass the verifier (tilegraph.loop.verify) runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from tilegraph.loop.ir import Func
from tilegraph.loop.printer import func_str
from tilegraph.loop.verify import verify
from tilegraph.lower.passes import (
    check_printable,
    compact_buffers,
    expand_unroll,
    flatten_buffers,
    group_int8_products,
    hoist_invariant_guards,
    hoist_reduction_init,
    lower_blocks,
    lower_vectorize,
    pair_bf16_products,
    promote_registers,
    simplify,
    stack_small_buffers,
)

DUMP_ENV = "TILEGRAPH_DUMP_IR"
Pass = Callable[[Func, object], Func]

PASSES: list[tuple[str, Pass]] = [
    ("compact_buffers", compact_buffers.run),
    ("stack_small_buffers", stack_small_buffers.run),
    ("hoist_reduction_init", hoist_reduction_init.run),
    ("lower_blocks", lower_blocks.run),
    ("simplify", simplify.run),
    ("flatten_buffers", flatten_buffers.run),
    ("lower_vectorize", lower_vectorize.run),
    ("expand_unroll", expand_unroll.run),
    ("hoist_invariant_guards", hoist_invariant_guards.run),
    ("final_simplify", simplify.run),
    ("promote_registers", promote_registers.run),
    ("pair_bf16_products", pair_bf16_products.run),
    ("group_int8_products", group_int8_products.run),
    ("check_printable", check_printable.run),
]


def lower(func: Func, target: object, dump: bool | None = None) -> Func:
    """Run PASSES in order, verifying after each. `dump` (default: env TILEGRAPH_DUMP_IR=1) prints the IR after each."""
    if dump is None:
        dump = os.environ.get(DUMP_ENV, "") not in ("", "0")
    if dump:
        print(f"# input\n{func_str(func)}")
    for name, run in PASSES:
        func = run(func, target)
        if dump:
            print(f"# after {name}\n{func_str(func)}")
        verify(func)
    return func


__all__ = ["PASSES", "lower"]
