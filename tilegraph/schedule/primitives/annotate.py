"""parallel / vectorize / unroll / bind: change how a loop's iterations are executed.

    for i in range(64): S     parallel(i)     for i in range(64) parallel: S

Legality: a loop whose variable feeds a reduce iteration variable of a block cannot run its
iterations concurrently (parallel, vectorized, GPU thread kinds): they would update one
accumulator at once. A vectorized loop must be innermost (no loop in its body).

One exception, a cross-thread reduction: bind(k, "threadIdx.x") on a reduction loop of extent a
power of two up to 32 (one warp) whose body is one sum/max/min reduction block, and which feeds no
spatial variable of it. Each lane then reduces its share into a register and the lanes combine
them with warp shuffles (lower/gpu/lower_cross_thread_reduction.py):

    for k_1 in range(32):                      bind(k_1, "threadIdx.x")    for k_1 in range(32) threadIdx.x:
      for k_0 in range(4):                     ----------------------->      for k_0 in range(4):
        block s(v_i=i, v_k*=k_0*32 + k_1): s[v_i] += x[v_i, v_k]                block s(...): ...
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import GPU_LOOP_KINDS, For, Func
from tilegraph.loop.visit import blocks, reduce_loop_of, walk_stmts
from tilegraph.schedule.primitives.common import get_loop, require
from tilegraph.schedule.primitives.rfactor import match_reduction
from tilegraph.te.visit import uses_var

MAX_VECTOR_EXTENT = 64


def _annotate(func: Func, loop: str, kind: str) -> tuple[Func, tuple[str, ...]]:
    target = get_loop(func, loop)
    require(target.kind == "serial", f"{kind} {loop}: the loop is already {target.kind}")
    if kind != "unrolled":
        racing = reduce_loop_of(target)
        if racing and kind == "threadIdx.x":
            _require_cross_thread_reduction(target, racing)
        else:
            require(not racing, f"cannot make loop {loop} {kind}: it is a reduction loop of block(s) {racing}, "
                                "so concurrent iterations would update the same accumulator")
    if kind == "vectorized":
        require(not any(isinstance(s, For) for s in walk_stmts(target.body)),
                f"cannot vectorize loop {loop}: it contains other loops (vectorize an innermost loop)")
        require(target.extent <= MAX_VECTOR_EXTENT,
                f"cannot vectorize loop {loop} of extent {target.extent} (> {MAX_VECTOR_EXTENT}); split it first")
    return replace_node(func, target, replace(target, kind=kind)), ()


MAX_CROSS_THREAD_LANES = 32  # one warp: the lanes combine with shuffles


def _require_cross_thread_reduction(loop: For, racing: list[str]) -> None:
    where = f"bind {loop.var.name} threadIdx.x (a cross-thread reduction of {racing[0]})"
    require(loop.extent & (loop.extent - 1) == 0 and loop.extent <= MAX_CROSS_THREAD_LANES,
            f"{where}: the extent {loop.extent} must be a power of two of at most {MAX_CROSS_THREAD_LANES}")
    inner = blocks(loop.body)
    require(len(inner) == 1, f"{where}: the loop must hold exactly one block, not {len(inner)}")
    block = inner[0]
    match_reduction(block, where)
    for iv, bind in zip(block.iter_vars, block.bindings):
        require(iv.kind == "reduce" or not any(uses_var(bind, x.var) for x in walk_stmts(loop) if isinstance(x, For)),
                f"{where}: loops under and at {loop.var.name} feed the spatial variable {iv.var.name}")


def parallel(func: Func, loop: str) -> tuple[Func, tuple[str, ...]]:
    return _annotate(func, loop, "parallel")


def vectorize(func: Func, loop: str) -> tuple[Func, tuple[str, ...]]:
    return _annotate(func, loop, "vectorized")


def unroll(func: Func, loop: str) -> tuple[Func, tuple[str, ...]]:
    return _annotate(func, loop, "unrolled")


def bind(func: Func, loop: str, thread_axis: str) -> tuple[Func, tuple[str, ...]]:
    require(thread_axis in GPU_LOOP_KINDS, f"bind {loop}: unknown thread axis {thread_axis!r}; use one of {GPU_LOOP_KINDS}")
    return _annotate(func, loop, thread_axis)
