"""insert_barriers: a Barrier wherever one thread may read (or overwrite) shared memory that
another thread wrote (or still reads) since the last barrier.

    for tx in range(64) threadIdx.x:               for tx in range(64) threadIdx.x:
      for k_0 in range(4):                           for k_0 in range(4):
        a_shared[tx] = a[k_0 * 64 + tx]    ==>         barrier                  (WAR: last iteration's readers)
        acc += a_shared[63 - tx]                       a_shared[tx] = a[k_0 * 64 + tx]
                                                       barrier                  (RAW)
                                                       acc += a_shared[63 - tx]

The analysis runs over each kernel body (the statements inside the blockIdx loops) in program order
with the sets of shared buffers written and read since the last barrier. A serial loop is
analysed to a fixpoint with its own end state fed back to its start, which places the barrier that
protects the next iteration's overwrite. Thread-dependent conditions are taken whole; one that
needs a barrier inside, or a barrier needed outside every threadIdx loop, is a LoweringError.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import Allocate, Barrier, BufferStore, For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.lower.gpu.common import BLOCK_KINDS, THREAD_IDX_KINDS, shared_accesses
from tilegraph.te.visit import free_vars

State = tuple[frozenset[str], frozenset[str]]  # (written since barrier, read since barrier)
EMPTY: State = (frozenset(), frozenset())


def run(func: Func, target: object = None) -> Func:
    return replace(func, body=_kernels(func.body))


def _kernels(s: Stmt) -> Stmt:
    if isinstance(s, For) and s.kind in BLOCK_KINDS:
        body = s.body
        while isinstance(body, For) and body.kind in BLOCK_KINDS:
            body = body.body
        new_body, _ = _sync(body, EMPTY, _Context(in_threads=False, thread_vars=frozenset()))
        return _replace_innermost(s, new_body)
    if isinstance(s, Seq):
        return Seq(tuple(_kernels(x) for x in s.stmts))
    if isinstance(s, Allocate):
        return replace(s, body=_kernels(s.body))
    return s


def _replace_innermost(s: For, body: Stmt) -> For:
    if isinstance(s.body, For) and s.body.kind in BLOCK_KINDS:
        return replace(s, body=_replace_innermost(s.body, body))
    return replace(s, body=body)


class _Context:
    def __init__(self, in_threads: bool, thread_vars: frozenset[str]):
        self.in_threads = in_threads
        self.thread_vars = thread_vars


def _sync(s: Stmt, state: State, ctx: _Context) -> tuple[Stmt, State]:
    reads, writes = shared_accesses(s)
    if not reads and not writes:
        return s, state
    if not isinstance(s, (BufferStore, IfThenElse)) and ctx.in_threads and _conflicts(reads, writes, state):
        s, _ = _sync(s, EMPTY, ctx)
        return seq(Barrier("shared"), s), _after(s, EMPTY)
    if isinstance(s, Seq):
        out = []
        for x in s.stmts:
            x, state = _sync(x, state, ctx)
            out.append(x)
        return seq(*out), state
    if isinstance(s, Allocate):
        body, state = _sync(s.body, state, ctx)
        return replace(s, body=body), state
    if isinstance(s, For) and s.kind in THREAD_IDX_KINDS:
        inner = _Context(True, ctx.thread_vars | {s.var.name})
        body, state = _sync(s.body, state, inner)
        return replace(s, body=body), state
    if isinstance(s, For):
        start = state
        while True:
            body, end = _sync(s.body, start, ctx)
            merged = (start[0] | end[0], start[1] | end[1])
            if merged == start:
                return replace(s, body=body), end
            start = merged
    if isinstance(s, IfThenElse) and not {v.name for v in free_vars(s.cond)} & ctx.thread_vars:
        then, st1 = _sync(s.then_body, state, ctx)
        other, st2 = (None, state) if s.else_body is None else _sync(s.else_body, state, ctx)
        return IfThenElse(s.cond, then, other), (st1[0] | st2[0], st1[1] | st2[1])
    if isinstance(s, IfThenElse):
        inner, _ = _sync(s.then_body, EMPTY, ctx)
        inner_else = Seq(()) if s.else_body is None else _sync(s.else_body, EMPTY, ctx)[0]
        if _has_barrier(inner) or _has_barrier(inner_else):
            raise LoweringError("shared memory is written and read under a condition that differs between "
                                "threads; a barrier there would deadlock")
    pending_writes, pending_reads = state
    if _conflicts(reads, writes, state):
        if not ctx.in_threads:
            names = sorted((reads | writes) & (pending_writes | pending_reads))
            raise LoweringError(f"shared buffer(s) {names} are shared between separate threadIdx loop nests; "
                                "a barrier is needed outside every threadIdx loop. Put producer and consumer "
                                "under the same threadIdx loops (compute_at)")
        return seq(Barrier("shared"), s), (writes, reads)
    return s, (pending_writes | writes, pending_reads | reads)


def _conflicts(reads: frozenset[str], writes: frozenset[str], state: State) -> bool:
    """A read after another thread's write (RAW) or a write over another thread's read (WAR)."""
    return bool((reads & state[0]) or (writes & state[1]))


def _after(s: Stmt, state: State) -> State:
    """The state after `s` (already synchronised inside) runs from `state`."""
    return _sync(s, state, _Context(True, frozenset()))[1]


def _has_barrier(s: Stmt) -> bool:
    from tilegraph.loop.visit import walk_stmts

    return any(isinstance(x, Barrier) for x in walk_stmts(s))


__all__ = ["run"]
