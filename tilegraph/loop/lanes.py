"""lanes: which loops of a Func the interpreter may run as numpy lanes (a static analysis).

The interpreter (tilegraph.loop.interpret) turns a "lane loop" into a numpy axis and evaluates
every statement under it for all iterations at once, one statement after another. That is only
the serial meaning if no iteration can see what another iteration wrote:

    for i in range(4):                      lane-safe: iteration i writes only B[i]
      B[i] = A[i] * 2

    for i in range(4):                      not lane-safe: iteration i reads B[i - 1], which
      B[i] = B[i - 1] + A[i]                iteration i-1 wrote (a prefix sum)

    for k in range(4):                      not lane-safe: k feeds a reduce variable, so every
      block C(v_k*=k): C[0] += A[k]         iteration updates the same C[0]

The invariant: a loop is a lane loop when its variable feeds no reduce variable and every buffer
it writes is

  - written at indices that determine the loop variable (other loops outside it fixed, loops
    inside it free), and read under it only at indices it writes there (accumulator style), or
  - Allocate'd inside the loop (each lane gets its own storage anyway), or
  - an intermediate that the caller cannot observe and that is used only inside this loop: then
    it is privatised, every lane gets a copy, and the lanes cannot see each other's writes.

GPU thread loops in lockstep mode are "forced" lanes: statements between barriers run in every
thread at once, local buffers are private per thread and shared buffers are shared per block.

Anything the analysis does not understand answers "not a lane loop", so the loop runs serially.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tilegraph.loop.ir import Allocate, Block, Buffer, BufferStore, For, Func, IfThenElse, Seq, Stmt, TileProduct
from tilegraph.loop.verify import THREAD_KINDS
from tilegraph.loop.visit import reduce_loop_of, stmt_children, walk_stmts
from tilegraph.te.arith import affine, extents_to_bounds, value_bounds
from tilegraph.te.expr import BinOp, BufferLoad, Const, Expr, Var
from tilegraph.te.visit import substitute, walk


@dataclass(frozen=True)
class LoopPlan:
    """How the interpreter may run one loop."""

    lane: bool                  # iterations independent: may become a lane axis
    forced: bool                # GPU threads with barriers in lockstep mode: always lanes
    private: tuple[str, ...]    # buffers that get one copy per lane of this loop
    work_factor: int            # lanes forced below it (thread loops) x largest private buffer
    cross_thread_reduction: bool = False  # a thread loop driving a reduction: run as a serial loop


@dataclass
class _Access:
    buffer: Buffer
    is_store: bool
    loops: tuple[For, ...]      # enclosing loops, outermost first
    indices: tuple[Expr, ...]   # in loop variables (block variables substituted)


def plan_loops(func: Func, lockstep: bool, observable: set[str]) -> dict[int, LoopPlan]:
    """A LoopPlan for every For of `func`, keyed by id(loop).

    `lockstep`: GPU thread loops run as forced lanes. Buffers in `observable` (params and
    caller-supplied arrays) are never privatised: their final contents must be those of serial
    execution.
    """
    accesses: list[_Access] = []
    allocated_under: dict[int, dict[str, Buffer]] = {}
    extents: dict[str, int] = {}
    _collect(func.body, (), {}, accesses, allocated_under, extents)
    total: dict[str, int] = {}
    for a in accesses:
        total[a.buffer.name] = total.get(a.buffer.name, 0) + 1
    plans: dict[int, LoopPlan] = {}
    around_tiles: set[int] = set()
    _loops_around_tile_products(func.body, [], around_tiles)
    for lp in (s for s in walk_stmts(func.body) if isinstance(s, For)):
        under = [a for a in accesses if any(x is lp for x in a.loops)]
        count: dict[str, int] = {}
        for a in under:
            count[a.buffer.name] = count.get(a.buffer.name, 0) + 1
        allocated = allocated_under.get(id(lp), {})
        # a tile_product reads and writes whole tiles at origins the analysis does not follow
        reduces = bool(reduce_loop_of(lp)) or id(lp) in around_tiles
        # a thread loop driving a reduction is a cross-thread reduction (annotate.bind): it means
        # the reduction over its lanes, which the serial loop computes
        forced = lockstep and lp.kind in THREAD_KINDS and not reduces
        lane = forced or not reduces
        private: dict[str, Buffer] = {}
        for name in {a.buffer.name for a in under if a.is_store and a.buffer.name not in allocated}:
            if _writes_own_places(lp, [a for a in under if a.buffer.name == name], extents):
                continue
            buf = next(a.buffer for a in under if a.buffer.name == name)
            if forced:  # threads of a block in lockstep: local is per thread, shared per block
                if buf.scope == "local":
                    private[name] = buf
            elif name not in observable and count[name] == total[name]:
                private[name] = buf
            else:
                lane = False
        biggest = max([1, *(b.size for b in (*private.values(), *allocated.values()))])
        below = _thread_lanes_below(lp.body) if lockstep else 1
        plans[id(lp)] = LoopPlan(lane, forced, tuple(sorted(private)), biggest * below,
                                 lp.kind in THREAD_KINDS and reduces)
    return plans


def _loops_around_tile_products(s: Stmt, loops: list[int], out: set[int]) -> None:
    if isinstance(s, TileProduct):
        out.update(loops)
        return
    if isinstance(s, For):
        loops = [*loops, id(s)]
    for k in stmt_children(s):
        _loops_around_tile_products(k, loops, out)


def _writes_own_places(lp: For, accesses: list[_Access], extents: dict[str, int]) -> bool:
    """Each iteration of `lp` writes places no other iteration writes, and reads the buffer
    only at places it writes itself (like an accumulator): no lane sees another lane's data."""
    stores = [a for a in accesses if a.is_store]
    for a in stores:
        inner = {x.var.name for x in a.loops[[id(x) for x in a.loops].index(id(lp)):]}
        if not determines(a.indices, lp.var.name, inner, extents):
            return False
    written = {a.indices for a in stores}
    return all(a.indices in written for a in accesses if not a.is_store)


def _collect(s: Stmt, loops: tuple[For, ...], binds: dict[Var, Expr], out: list[_Access],
             allocated_under: dict[int, dict[str, Buffer]], extents: dict[str, int]) -> None:
    def loads(e: Expr) -> None:
        for x in walk(e):
            if isinstance(x, BufferLoad):
                out.append(_Access(x.buffer, False, loops, tuple(substitute(i, binds) for i in x.indices)))

    if isinstance(s, Seq):
        for x in s.stmts:
            _collect(x, loops, binds, out, allocated_under, extents)
    elif isinstance(s, For):
        extents[s.var.name] = s.extent
        _collect(s.body, (*loops, s), binds, out, allocated_under, extents)
    elif isinstance(s, Block):
        for b in s.bindings:
            loads(b)
        inner = dict(binds)
        inner.update({iv.var: substitute(b, binds) for iv, b in zip(s.iter_vars, s.bindings)})
        for iv in s.iter_vars:
            extents.setdefault(iv.var.name, iv.extent)
        loads(s.predicate)
        for x in (s.init, s.body):
            if x is not None:
                _collect(x, loops, inner, out, allocated_under, extents)
    elif isinstance(s, BufferStore):
        for i in s.indices:
            loads(i)
        loads(s.value)
        out.append(_Access(s.buffer, True, loops, tuple(substitute(i, binds) for i in s.indices)))
    elif isinstance(s, IfThenElse):
        loads(s.cond)
        for x in (s.then_body, s.else_body):
            if x is not None:
                _collect(x, loops, binds, out, allocated_under, extents)
    elif isinstance(s, TileProduct):  # whole tiles from these origins: read a, b and acc, write acc
        for buf, at in ((s.a, s.a_at), (s.b, s.b_at), (s.acc, s.acc_at)):
            out.append(_Access(buf, False, loops, (substitute(at, binds),)))
        out.append(_Access(s.acc, True, loops, (substitute(s.acc_at, binds),)))
    elif isinstance(s, Allocate):
        for lp in loops:
            allocated_under.setdefault(id(lp), {})[s.buffer.name] = s.buffer
        _collect(s.body, loops, binds, out, allocated_under, extents)


def _thread_lanes_below(s: Stmt) -> int:
    own = s.extent if isinstance(s, For) and s.kind in THREAD_KINDS else 1
    return own * max([1, *(_thread_lanes_below(k) for k in stmt_children(s))])


# ---------------------------------------------------------------------------- injectivity
# Do the store indices determine `var` when loops outside it are fixed but loops inside it
# (and `var`) vary? Known expressions are peeled: a linear form whose terms' coefficients are
# mixed-radix (each larger than the spread of the smaller ones) reveals every term; a // c and
# a % c together reveal a. Anything not understood answers "no" (the loop then runs serially).


def determines(indices: Sequence[Expr], var: str, inner: set[str], extents: dict[str, int]) -> bool:
    """True when the values of `indices` pin down the value of loop variable `var`, with the
    variables in `inner` (var and the loops inside it) free and every other variable fixed;
    `extents` maps variable names to their extents. False when unsure."""

    def is_known(e: Expr, known: set[Expr]) -> bool:
        return e in known or not any(isinstance(x, Var) and x.name in inner for x in walk(e))

    known: set[Expr] = set()
    pending = list(indices)
    forms: list[dict[Expr, int]] = []
    for _ in range(64):
        while pending:
            forms.append(affine(pending.pop())[0])
        progress = False
        for form in forms:
            terms = sorted(((abs(c), t) for t, c in form.items() if not is_known(t, known)),
                           key=lambda ct: -ct[0])
            for n, (coef, atom) in enumerate(terms):
                spread = 0
                for c2, t2 in terms[n + 1:]:
                    lo, hi = _bounds(t2, extents)
                    if lo is None or hi is None:
                        spread = math.inf
                        break
                    spread += c2 * (hi - lo)
                if spread >= coef:
                    break
                known.add(atom)
                progress = True
                if isinstance(atom, Var) and atom.name == var:
                    return True
                pending.extend(_revealed_by(atom, known, extents))
        if not progress and not pending:
            return False
    return False


def _revealed_by(atom: Expr, known: set[Expr], extents: dict[str, int]) -> list[Expr]:
    if not (isinstance(atom, BinOp) and atom.op in ("floordiv", "floormod") and isinstance(atom.b, Const)
            and atom.b.value > 0):
        return []
    partner = BinOp("floormod" if atom.op == "floordiv" else "floordiv", atom.a, atom.b)
    if partner in known:
        return [atom.a]
    lo, hi = _bounds(atom.a, extents)
    c = atom.b.value
    if lo is not None and hi is not None and lo // c == hi // c and atom.op == "floormod":
        return [atom.a]  # a % c == a - const when a stays in one window of width c
    return []


def _bounds(e: Expr, extents: dict[str, int]) -> tuple[int | None, int | None]:
    """Inclusive bounds of an index expression over loop variables in [0, extent), (None, None) if unknown."""
    found = value_bounds(e, extents_to_bounds(extents))
    return found if found is not None else (None, None)


__all__ = ["LoopPlan", "plan_loops", "determines"]
