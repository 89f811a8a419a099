"""Helpers shared by the GPU passes: thread-loop kinds and shared-memory access sets."""

from __future__ import annotations

from tilegraph.loop.ir import Allocate, BufferStore, For, Stmt
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.te.expr import BufferLoad
from tilegraph.te.visit import walk

BLOCK_KINDS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_IDX_KINDS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")  # loop.verify.THREAD_KINDS adds vthread
AXES = ("x", "y", "z")


def shared_accesses(s: Stmt) -> tuple[frozenset[str], frozenset[str]]:
    """(names read, names written) of shared-scope buffers anywhere under `s`."""
    reads: set[str] = set()
    writes: set[str] = set()
    for x in walk_stmts(s):
        if isinstance(x, BufferStore) and x.buffer.scope == "shared":
            writes.add(x.buffer.name)
        for e in stmt_exprs(x):
            reads.update(n.buffer.name for n in walk(e) if isinstance(n, BufferLoad) and n.buffer.scope == "shared")
    return frozenset(reads), frozenset(writes)


def allocated(s: Stmt, scope: str) -> list[Allocate]:
    return [x for x in walk_stmts(s) if isinstance(x, Allocate) and x.buffer.scope == scope]


def thread_loops(s: Stmt) -> list[For]:
    return [x for x in walk_stmts(s) if isinstance(x, For) and x.kind in THREAD_IDX_KINDS]
