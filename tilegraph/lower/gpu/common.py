"""Helpers shared by the GPU passes: thread-loop kinds and shared-memory access sets."""

from __future__ import annotations

from tilegraph.loop.ir import Allocate, BufferStore, For, Stmt
from tilegraph.loop.visit import loads_under, walk_stmts

BLOCK_KINDS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_IDX_KINDS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")  # loop.verify.THREAD_KINDS adds vthread
AXES = ("x", "y", "z")


def accesses_in_scope(s: Stmt, scope: str) -> tuple[frozenset[str], frozenset[str]]:
    """(names read, names written) of the buffers of `scope` anywhere under `s`."""
    writes = {x.buffer.name for x in walk_stmts(s) if isinstance(x, BufferStore) and x.buffer.scope == scope}
    reads = {load.buffer.name for load in loads_under(s) if load.buffer.scope == scope}
    return frozenset(reads), frozenset(writes)


def shared_accesses(s: Stmt) -> tuple[frozenset[str], frozenset[str]]:
    """(names read, names written) of shared-scope buffers anywhere under `s`."""
    return accesses_in_scope(s, "shared")


def allocated(s: Stmt, scope: str) -> list[Allocate]:
    return [x for x in walk_stmts(s) if isinstance(x, Allocate) and x.buffer.scope == scope]


def thread_loops(s: Stmt) -> list[For]:
    return [x for x in walk_stmts(s) if isinstance(x, For) and x.kind in THREAD_IDX_KINDS]
