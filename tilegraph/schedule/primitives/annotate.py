"""parallel / vectorize / unroll / bind: change how a loop's iterations are executed.

    for i in range(64): S     parallel(i)     for i in range(64) parallel: S

Legality: a loop whose variable feeds a reduce iteration variable of a block cannot run its
iterations concurrently (parallel, vectorized, GPU thread kinds): they would update one
accumulator at once. A vectorized loop must be innermost (no loop in its body).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.ir import GPU_LOOP_KINDS, For, Func
from tilegraph.loop.visit import reduce_loop_of, replace_node, walk_stmts
from tilegraph.schedule.primitives.common import get_loop, require

MAX_VECTOR_EXTENT = 64


def _annotate(func: Func, loop: str, kind: str) -> tuple[Func, tuple[str, ...]]:
    target = get_loop(func, loop)
    require(target.kind == "serial", f"{kind} {loop}: the loop is already {target.kind}")
    if kind != "unrolled":
        racing = reduce_loop_of(target)
        require(not racing, f"cannot make loop {loop} {kind}: it is a reduction loop of block(s) {racing}, "
                            "so concurrent iterations would update the same accumulator")
    if kind == "vectorized":
        require(not any(isinstance(s, For) for s in walk_stmts(target.body)),
                f"cannot vectorize loop {loop}: it contains other loops (vectorize an innermost loop)")
        require(target.extent <= MAX_VECTOR_EXTENT,
                f"cannot vectorize loop {loop} of extent {target.extent} (> {MAX_VECTOR_EXTENT}); split it first")
    return replace_node(func, target, replace(target, kind=kind)), ()


def parallel(func: Func, loop: str) -> tuple[Func, tuple[str, ...]]:
    return _annotate(func, loop, "parallel")


def vectorize(func: Func, loop: str) -> tuple[Func, tuple[str, ...]]:
    return _annotate(func, loop, "vectorized")


def unroll(func: Func, loop: str) -> tuple[Func, tuple[str, ...]]:
    return _annotate(func, loop, "unrolled")


def bind(func: Func, loop: str, thread_axis: str) -> tuple[Func, tuple[str, ...]]:
    require(thread_axis in GPU_LOOP_KINDS, f"bind {loop}: unknown thread axis {thread_axis!r}; use one of {GPU_LOOP_KINDS}")
    return _annotate(func, loop, thread_axis)
