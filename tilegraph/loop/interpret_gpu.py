"""interpret_gpu: GPU thread loops run one thread at a time, from barrier to barrier.

Used by tilegraph.loop.interpret when thread_order is "serial", "reversed" or "random" (in
"lockstep" mode thread loops are ordinary lane loops, see tilegraph.loop.lanes). The nest of
thread loops (threadIdx.*, vthread) directly around a body becomes one block of threads:

    for tx in range(2) threadIdx.x:          phase 1: tx=0 runs S[tx] = A[tx]
      S[tx] = A[tx]                                   tx=1 runs S[tx] = A[tx]
      barrier                        ==>     phase 2: tx=0 runs B[tx] = S[1 - tx]
      B[tx] = S[1 - tx]                               tx=1 runs B[tx] = S[1 - tx]

Without the barrier both statements form one phase, so tx=0 reads S[1] before tx=1 wrote it:
a missing barrier gives wrong (poisoned) results, as on a GPU.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import Allocate, AllReduce, Barrier, For, IfThenElse, Seq, Stmt
from tilegraph.loop.verify import THREAD_KINDS
from tilegraph.loop.visit import walk_stmts

if TYPE_CHECKING:
    from tilegraph.loop.interpret import Machine, Store


def run_threads(machine: Machine, s: For, env: dict[str, object], mask: np.ndarray | None) -> None:
    """Run thread loop `s` (and the thread loops directly inside it) thread by thread."""
    chain = [s]
    while (isinstance(chain[-1].body, For) and chain[-1].body.kind in THREAD_KINDS
           and not machine.plans[id(chain[-1].body)].cross_thread_reduction):  # that one runs as a serial loop
        chain.append(chain[-1].body)
    combos = itertools.product(*(range(lp.extent) for lp in chain))
    envs = [dict(env, **{lp.var.name: v for lp, v in zip(chain, c)}) for c in combos]
    block = _ThreadBlock(machine, envs, mask, chain)
    block.walk(chain[-1].body, {})
    block.flush()


_COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def butterfly(values: np.ndarray, axis: int, combiner: str, width: int) -> np.ndarray:
    """AllReduce's meaning: along `axis` (the threadIdx.x lanes), for m = width/2 .. 1, every
    lane combines its value with lane ^ m's (in groups of `width` lanes)."""
    op = _COMBINE[combiner]
    lanes = np.arange(values.shape[axis])
    m = width // 2
    while m >= 1:
        values = op(values, np.take(values, lanes ^ m, axis=axis)).astype(values.dtype, copy=False)
        m //= 2
    return values


class _ThreadBlock:
    """The threads of one GPU block, run one after another between barriers.

    Statements without a barrier are queued (with the values of the loops around them that
    contain barriers); a barrier runs the queue in every thread in turn, thread by thread. A
    loop containing barriers is unrolled, so the phase after its last barrier continues into
    the next iteration, as on a GPU. Local buffers Allocate'd around barriers get one copy per
    thread (an Allocate between barriers runs inside each thread anyway).
    """

    def __init__(self, machine: Machine, envs: list[dict[str, object]], mask: np.ndarray | None,
                 chain: list[For] | None = None):
        self.m = machine
        self.chain = chain or []
        self.envs = envs
        self.mask = mask
        self.own: list[dict[str, Store]] = [{} for _ in envs]
        self.per_thread: set[str] = set()  # local buffers Allocate'd around barriers
        self.queue: list[tuple[Stmt, dict[str, object]]] = []

    def has_barrier(self, s: Stmt) -> bool:
        cache = self.m.barrier_cache
        hit = cache.get(id(s))
        if hit is None:
            hit = cache[id(s)] = any(isinstance(x, (Barrier, AllReduce)) for x in walk_stmts(s))
        return hit

    def walk(self, s: Stmt, binds: dict[str, object]) -> None:
        if not self.has_barrier(s):
            self.queue.append((s, binds))
        elif isinstance(s, Barrier):
            self.flush()
        elif isinstance(s, AllReduce):
            self.flush()
            self.all_reduce(s, binds)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.walk(x, binds)
        elif isinstance(s, For) and s.kind not in THREAD_KINDS:
            for v in range(s.extent):
                self.walk(s.body, {**binds, s.var.name: v})
        elif isinstance(s, IfThenElse):
            self.flush()
            taken = {bool(np.all(self.m.eval(s.cond, {**e, **binds}, self.mask))) for e in self.envs}
            if len(taken) != 1:
                raise LoweringError("interpret: a barrier is under a condition that differs between threads")
            branch = s.then_body if taken.pop() else s.else_body
            if branch is not None:
                self.walk(branch, binds)
        elif isinstance(s, Allocate):
            name = s.buffer.name
            if s.buffer.scope == "local":
                self.per_thread.add(name)

            def run() -> None:
                self.walk(s.body, binds)
                self.flush()

            self.m.with_storage(s.buffer, run)
            self.per_thread.discard(name)
            for o in self.own:
                o.pop(name, None)
        else:
            raise LoweringError(f"interpret: a barrier inside a {type(s).__name__} cannot be run thread by thread")

    def all_reduce(self, s: AllReduce, binds: dict[str, object]) -> None:
        """Exchange the per-thread copies of `s.buffer` between the lanes of each group."""
        if s.width == 1:
            return
        name = s.buffer.name
        xs = [lp.var.name for lp in self.chain if lp.kind == "threadIdx.x"]
        if name not in self.per_thread or not xs:
            raise LoweringError(f"interpret: allreduce({name}) needs a local buffer allocated around it, in a "
                                "threadIdx.x loop")
        x = xs[-1]
        others = [lp.var.name for lp in self.chain if lp.var.name != x]
        group: dict[tuple, int] = {}
        for t, e in enumerate(self.envs):
            group[(*(e[o] for o in others), e[x])] = t
        copies = []
        for t in range(len(self.envs)):
            mine = self.own[t].get(name)
            if mine is None:
                st = self.m.stores[name]
                mine = self.own[t][name] = replace(st, array=st.array.copy())
            copies.append(mine)
        for key_others in {k[:-1] for k in group}:
            lanes = sorted(k[-1] for k in group if k[:-1] == key_others)
            if lanes != list(range(len(lanes))) or len(lanes) % s.width:
                raise LoweringError(f"interpret: allreduce({name}) over {len(lanes)} lanes in groups of {s.width}")
            members = [group[(*key_others, lane)] for lane in lanes]
            stacked = np.stack([copies[t].array for t in members])
            reduced = butterfly(stacked, 0, s.combiner, s.width)
            for t, value in zip(members, reduced):
                copies[t].array[...] = value

    def flush(self) -> None:
        if not self.queue:
            return
        n = len(self.envs)
        order = self.m.rng.permutation(n).tolist() if self.m.thread_order == "random" else list(range(n))
        if self.m.thread_order == "reversed":
            order.reverse()
        stores = self.m.stores
        local = sorted(self.per_thread)
        for t in order:
            saved = {}
            for name in local:
                mine = self.own[t].get(name)
                if mine is None:
                    st = stores[name]
                    mine = self.own[t][name] = replace(st, array=st.array.copy())
                saved[name] = stores[name]
                stores[name] = mine
            try:
                for stmt, binds in self.queue:
                    self.m.exec(stmt, {**self.envs[t], **binds}, self.mask)
            finally:
                stores.update(saved)
        self.queue = []


__all__ = ["butterfly", "run_threads"]
