"""Postprocessor: the legality check every sampled or mutated program passes before it is scored.

    ok, why = check_program(sch.func)
    ok, why = check_for_target(sch.func, target)     # the target's limits (GPU threads per block)

A program that replays is legal IR, but some legal programs are not worth building: a mutation that
moves a tile factor into a loop the trace unrolls can ask for tens of thousands of unrolled
statements (Gensor's micro-kernel unrolls its register tile: a factor of 32 moved there took gcc
two minutes to compile). Such programs are rejected here, in microseconds, like MetaSchedule's
postprocessors reject theirs: a statement under unrolled loops whose extents multiply past
MAX_UNROLLED_STEPS. (Buffer sizes are not checked here: at this level a cache stage still has
its full shape; lowering compacts it to the region its loops touch.)
"""

from __future__ import annotations

from tilegraph.loop.ir import For, Func, Stmt
from tilegraph.loop.visit import stmt_children
from tilegraph.target import Target

MAX_UNROLLED_STEPS = 4096  # unrolled copies of one statement (vector lanes not counted); C2D-2's best: 1792


def check_program(func: Func) -> tuple[bool, str]:
    steps = _max_unrolled(func.body, 1)
    if steps > MAX_UNROLLED_STEPS:
        return False, f"{steps} unrolled copies of a statement (> {MAX_UNROLLED_STEPS})"
    return True, ""


def check_for_target(func: Func, target: Target) -> tuple[bool, str]:
    """The target's own limits, which the sketches cannot see: a GPU block no wider than the device
    allows (PoCL: 256 threads, CUDA: 1024). Lowering would refuse such a program; refusing it here
    costs microseconds instead of a build and a measurement slot."""
    limit = getattr(target, "max_threads_per_block", None)
    if not limit:
        return True, ""
    threads = _max_threads(func.body, 1)
    if threads > limit:
        return False, f"{threads} threads per block (the target allows {limit})"
    return True, ""


def _max_threads(s: Stmt, threads: int) -> int:
    if isinstance(s, For) and s.kind.startswith("threadIdx"):
        threads *= s.extent
    return max((_max_threads(c, threads) for c in stmt_children(s)), default=threads)


def _max_unrolled(s: Stmt, steps: int) -> int:
    if isinstance(s, For) and s.kind == "unrolled":
        steps *= s.extent
    return max((_max_unrolled(c, steps) for c in stmt_children(s)), default=steps)
