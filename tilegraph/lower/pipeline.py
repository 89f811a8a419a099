"""The lowering pipeline: scheduled loop IR -> flat IR the printers print without deciding.

    lowered = lower(sch.func, Target("cpu"))            # TILEGRAPH_DUMP_IR=1 prints each step
    lowered = lower(sch.func, target, dump=True)

PASSES is the ordered list of (name, run); each pass lives in lower/passes/<name>.py and is a
pure `run(func, target) -> Func`. The verifier (tilegraph.loop.verify) checks the lowered IR; with
TILEGRAPH_VERIFY=1 (the test suite sets it) it runs after every pass, so a pass that breaks an
invariant is named where it does. Not by default: between passes it cost a quarter of lowering,
which the tuner does for every candidate, and a kernel still never reaches a user unchecked (the
tuner checks every candidate's output against a float64 reference).
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
    pin_operand_vectors,
    promote_registers,
    relax_dims_guards,
    simplify,
    skip_past_dims,
    stack_small_buffers,
    use_matrix_tiles,
)

DUMP_ENV = "TILEGRAPH_DUMP_IR"
VERIFY_ENV = "TILEGRAPH_VERIFY"  # the graph passes' switch too (graph/passes)
Pass = Callable[[Func, object], Func]

PASSES: list[tuple[str, Pass]] = [
    ("compact_buffers", compact_buffers.run),
    ("stack_small_buffers", stack_small_buffers.run),
    ("hoist_reduction_init", hoist_reduction_init.run),
    ("skip_past_dims", skip_past_dims.run),
    ("relax_dims_guards", relax_dims_guards.run),
    ("lower_blocks", lower_blocks.run),
    ("simplify", simplify.run),
    ("flatten_buffers", flatten_buffers.run),
    ("use_matrix_tiles", use_matrix_tiles.run),
    ("lower_vectorize", lower_vectorize.run),
    ("expand_unroll", expand_unroll.run),
    ("hoist_invariant_guards", hoist_invariant_guards.run),
    ("final_simplify", simplify.run),
    ("promote_registers", promote_registers.run),
    ("pair_bf16_products", pair_bf16_products.run),
    ("group_int8_products", group_int8_products.run),
    ("pin_operand_vectors", pin_operand_vectors.run),
    ("check_printable", check_printable.run),
]


def lower(func: Func, target: object, dump: bool | None = None) -> Func:
    """Run PASSES in order and verify the result (after every pass with TILEGRAPH_VERIFY=1).
    `dump` (default: env TILEGRAPH_DUMP_IR=1) prints the IR after each."""
    if dump is None:
        dump = os.environ.get(DUMP_ENV, "") not in ("", "0")
    every_pass = os.environ.get(VERIFY_ENV, "") not in ("", "0")
    if dump:
        print(f"# input\n{func_str(func)}")
    for name, run in PASSES:
        func = run(func, target)
        if dump:
            print(f"# after {name}\n{func_str(func)}")
        if every_pass:
            verify(func)
    if not every_pass:
        verify(func)
    return func


__all__ = ["PASSES", "lower"]
