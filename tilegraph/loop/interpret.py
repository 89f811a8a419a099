"""interpret: the executable meaning of the loop IR, on numpy arrays.

    C = tg.interpret(sch, A, B)                    # a Schedule, a Func or a Workload
    run_func(func, {"A": A, "B": B, "C": C})       # in place, caller-managed buffers

Semantics (see tilegraph.loop.ir): a loop runs its body for var = 0 .. extent-1 whatever its
kind; a block binds its variables, is skipped where its predicate is false and runs `init`
first in the instance where every reduce variable is 0. Float arithmetic happens in the buffer
dtype (float32 stays float32). Outputs, allocs and Allocate'd buffers start poisoned (NaN, or
the most negative integer), so elements nobody wrote show up. An out-of-bounds index raises
IndexError naming the buffer (numpy's negative-index wrap-around is never used).

Speed comes from lanes: a loop whose iterations are independent becomes a numpy axis
("lane axis") and every expression under it is evaluated for all its iterations at once.

    for i in range(64):                     i = arange(64)[:, None, None]    (lane axis 0)
      for j in range(48):          ==>      j = arange(48)[None, :, None]    (lane axis 1)
        for k in range(37):                 for k in 0..36: C[i, j] = C[i, j] + A[i, k] * B[k, j]
          C[i, j] += A[i, k] * B[k, j]          (one vectorised statement per k)

Values are 0-d scalars or arrays right-aligned to (*lane_shape, vector_lanes): the last axis
holds Ramp/Broadcast lanes (size 1 for scalars). A loop is a lane loop when its variable feeds
no reduce variable and every buffer it writes is either written at indices that determine the
loop variable (and read under it only where it is written), Allocate'd inside it, or an
intermediate used only inside it (then every lane gets a private copy). Guards (block
predicates, ifs, select branches) become lane masks.
Each output element sees the same operations in the same order as in serial execution.

GPU thread loops (threadIdx.*, vthread): with thread_order="lockstep" a thread loop containing
barriers is always a lane loop, so a statement finishes in every thread before the next starts
(shared buffers per block, local ones per thread); without barriers it is an ordinary loop. With
"serial", "reversed" or "random", the threads of a block run one after another from barrier to
barrier, so a missing barrier gives wrong results.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.special

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import Allocate, Barrier, Block, Buffer, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.verify import THREAD_KINDS, verify
from tilegraph.loop.visit import stmt_children, walk_stmts
from tilegraph.schedule.primitives.common import reduce_loop_of
from tilegraph.te.expr import (
    BinOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Not,
    Ramp,
    Select,
    Var,
)
from tilegraph.te.visit import substitute, walk

THREAD_ORDERS = ("lockstep", "serial", "reversed", "random")
# Lane loops are taken while lanes x private-buffer elements stay under this; else Python iterates.
MAX_LANE_WORK = 1 << 22


# ============================================================================ public entry points


def interpret(obj: object, *arrays: np.ndarray, outputs: int | Sequence[str] | None = None,
              thread_order: str = "lockstep", seed: int = 0) -> np.ndarray | tuple[np.ndarray, ...]:
    """Run a Schedule, Func or Workload on numpy inputs; returns the output array(s).

    `outputs` overrides which params are outputs: a count (the last n params) or param names.
    By default a Schedule/Workload's outputs are its workload's outputs, and a bare Func's are
    the params some BufferStore writes.
    """
    func, n_outputs = _as_func(obj)
    if outputs is not None:
        n_outputs = outputs
    out_bufs = _output_params(func, n_outputs)
    in_bufs = [b for b in func.params if all(b is not o for o in out_bufs)]
    if len(arrays) != len(in_bufs):
        names = ", ".join(b.name for b in in_bufs)
        raise ValueError(f"{func.name} takes {len(in_bufs)} input array(s) ({names}), got {len(arrays)}")
    buffers: dict[str, np.ndarray] = {}
    for b, a in zip(in_bufs, arrays):
        buffers[b.name] = _checked_input(b, a)
    for b in out_bufs:
        buffers[b.name] = _poisoned(b.storage_shape, b.dtype.numpy)
    run_func(func, buffers, thread_order=thread_order, seed=seed)
    results = tuple(_visible(buffers[b.name], b) for b in out_bufs)
    return results[0] if len(results) == 1 else results


def run_func(func: Func, buffers: dict[str, np.ndarray], thread_order: str = "lockstep", seed: int = 0) -> None:
    """Execute `func` in place on `buffers` (param name -> array of the buffer's shape or storage
    shape). Allocs missing from `buffers` are created poisoned."""
    if thread_order not in THREAD_ORDERS:
        raise ValueError(f"thread_order must be one of {THREAD_ORDERS}, got {thread_order!r}")
    verify(func)
    stores: dict[str, _Store] = {}
    for b in func.buffers:
        arr = buffers.get(b.name)
        if b.dtype.name == "bfloat16":
            raise TypeError(f"interpret: buffer {b.name} is bfloat16, which numpy cannot compute in")
        if arr is None and b in func.params:
            raise ValueError(f"buffers: no array for param {b.name} of {func.name}")
        if arr is None:
            arr = _poisoned(b.storage_shape, b.dtype.numpy)
        elif not isinstance(arr, np.ndarray) or arr.shape not in (b.shape, b.storage_shape):
            raise ValueError(f"buffers[{b.name!r}]: expected an array of shape {b.shape}, got {np.shape(arr)}")
        elif arr.dtype != b.dtype.numpy:
            raise TypeError(f"buffers[{b.name!r}]: expected dtype {b.dtype}, got {arr.dtype}")
        stores[b.name] = _Store(arr, (), b.scope)
    observable = {b.name for b in func.params} | set(buffers)
    machine = _Machine(func, stores, thread_order, seed, observable)
    with np.errstate(all="ignore"):
        machine.exec(func.body, {}, None)


def _as_func(obj: object) -> tuple[Func, int | None]:
    from tilegraph.schedule.schedule import Schedule
    from tilegraph.te.workload import Workload

    if isinstance(obj, Schedule):
        return obj.func, len(obj.workload.outputs)
    if isinstance(obj, Func):
        return obj, None
    if isinstance(obj, Workload):
        from tilegraph.loop.from_te import workload_to_func

        return workload_to_func(obj), len(obj.outputs)
    raise TypeError(f"interpret: expected a Schedule, Func or Workload, got {type(obj).__name__}")


def _output_params(func: Func, outputs: int | Sequence[str] | None) -> list[Buffer]:
    if outputs is None:
        written = {s.buffer.name for s in walk_stmts(func.body) if isinstance(s, BufferStore)}
        outs = [b for b in func.params if b.name in written]
    elif isinstance(outputs, int):
        if not 1 <= outputs <= len(func.params):
            raise ValueError(f"outputs: {func.name} has {len(func.params)} params, cannot have {outputs} outputs")
        outs = list(func.params[len(func.params) - outputs:])
    else:
        by_name = {b.name: b for b in func.params}
        missing = [n for n in outputs if n not in by_name]
        if missing:
            raise ValueError(f"outputs: {missing} are not params of {func.name} ({list(by_name)})")
        outs = [by_name[n] for n in outputs]
    if not outs:
        raise ValueError(f"{func.name} writes none of its params, so it has no outputs")
    return outs


def _checked_input(b: Buffer, a: object) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"input {b.name}: expected a numpy array, got {type(a).__name__}")
    if a.dtype != b.dtype.numpy:
        raise TypeError(f"input {b.name}: expected dtype {b.dtype}, got {a.dtype}")
    if b.ndim == 1 and a.ndim > 1 and a.size == b.shape[0]:
        a = a.reshape(-1)  # a flattened (lowered) buffer takes the array in row-major order
    if a.shape != b.shape:
        raise ValueError(f"input {b.name}: expected shape {b.shape}, got {a.shape}")
    storage = _poisoned(b.storage_shape, b.dtype.numpy)
    storage[tuple(slice(0, s) for s in b.shape)] = a
    return storage


def _visible(arr: np.ndarray, b: Buffer) -> np.ndarray:
    return arr[tuple(slice(0, s) for s in b.shape)].copy()


def _poisoned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype)
    if dtype.kind == "b":
        return np.ones(shape, dtype)
    info = np.iinfo(dtype)
    return np.full(shape, info.min if dtype.kind == "i" else info.max, dtype)


# ============================================================================ static plan


@dataclass(frozen=True)
class _LoopPlan:
    lane: bool                  # iterations independent: may become a lane axis
    forced: bool                # GPU threads with barriers in lockstep mode: always lanes
    private: tuple[str, ...]    # buffers that get one copy per lane of this loop
    work_factor: int            # lanes forced below it (thread loops) x largest private buffer


@dataclass
class _Access:
    buffer: Buffer
    is_store: bool
    loops: tuple[For, ...]      # enclosing loops, outermost first
    indices: tuple[Expr, ...]   # in loop variables (block variables substituted)


def _plan(func: Func, lockstep: bool, observable: set[str]) -> dict[int, _LoopPlan]:
    """Which loops may become lane axes. Buffers in `observable` (params and caller-supplied
    arrays) are never privatised: their final contents must be those of serial execution."""
    accesses: list[_Access] = []
    allocated_under: dict[int, dict[str, Buffer]] = {}
    extents: dict[str, int] = {}
    _collect(func.body, (), {}, accesses, allocated_under, extents)
    total: dict[str, int] = {}
    for a in accesses:
        total[a.buffer.name] = total.get(a.buffer.name, 0) + 1
    plans: dict[int, _LoopPlan] = {}
    for lp in (s for s in walk_stmts(func.body) if isinstance(s, For)):
        under = [a for a in accesses if any(x is lp for x in a.loops)]
        count: dict[str, int] = {}
        for a in under:
            count[a.buffer.name] = count.get(a.buffer.name, 0) + 1
        allocated = allocated_under.get(id(lp), {})
        forced = lockstep and lp.kind in THREAD_KINDS
        lane = forced or not reduce_loop_of(lp)
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
        plans[id(lp)] = _LoopPlan(lane, forced, tuple(sorted(private)), biggest * below)
    return plans


def _writes_own_places(lp: For, accesses: list[_Access], extents: dict[str, int]) -> bool:
    """Each iteration of `lp` writes places no other iteration writes, and reads the buffer
    only at places it writes itself (like an accumulator): no lane sees another lane's data."""
    stores = [a for a in accesses if a.is_store]
    for a in stores:
        inner = {x.var.name for x in a.loops[[id(x) for x in a.loops].index(id(lp)):]}
        if not _determines(a.indices, lp.var.name, inner, extents):
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


def _determines(indices: Sequence[Expr], var: str, inner: set[str], extents: dict[str, int]) -> bool:
    def is_known(e: Expr, known: set[Expr]) -> bool:
        return e in known or not any(isinstance(x, Var) and x.name in inner for x in walk(e))

    known: set[Expr] = set()
    pending = list(indices)
    forms: list[dict[Expr, int]] = []
    for _ in range(64):
        while pending:
            forms.append(_linear(pending.pop()))
        progress = False
        for form in forms:
            terms = sorted(((abs(c), t) for t, c in form.items() if t is not None and c != 0 and not is_known(t, known)),
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


def _linear(e: Expr) -> dict[Expr, int]:
    """e as {atom: coefficient}; the key None holds the constant."""
    if isinstance(e, Const) and not isinstance(e.value, float):
        return {None: int(e.value)}  # type: ignore[dict-item]
    if isinstance(e, BinOp) and e.op in ("add", "sub"):
        out = dict(_linear(e.a))
        sign = 1 if e.op == "add" else -1
        for t, c in _linear(e.b).items():
            out[t] = out.get(t, 0) + sign * c
        return out
    if isinstance(e, BinOp) and e.op == "mul":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, Const) and not isinstance(y.value, float):
                return {t: c * int(y.value) for t, c in _linear(x).items()}
    return {e: 1}


def _bounds(e: Expr, extents: dict[str, int]) -> tuple[int | None, int | None]:
    if isinstance(e, Var):
        n = extents.get(e.name)
        return (0, n - 1) if n is not None else (None, None)
    if isinstance(e, Const) and not isinstance(e.value, float):
        return int(e.value), int(e.value)
    if not isinstance(e, BinOp):
        return None, None
    (alo, ahi), (blo, bhi) = _bounds(e.a, extents), _bounds(e.b, extents)
    if None in (alo, ahi, blo, bhi):
        return None, None
    if e.op == "add":
        return alo + blo, ahi + bhi
    if e.op == "sub":
        return alo - bhi, ahi - blo
    if e.op == "mul":
        corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(corners), max(corners)
    if e.op in ("max", "min"):
        f = max if e.op == "max" else min
        return f(alo, blo), f(ahi, bhi)
    if e.op in ("floordiv", "floormod") and blo == bhi and blo > 0:
        if e.op == "floordiv":
            return alo // blo, ahi // blo
        if alo // blo == ahi // blo:
            return alo % blo, ahi % blo
        return 0, blo - 1
    return None, None


# ============================================================================ execution


@dataclass
class _Store:
    array: np.ndarray           # (*private lane dims, *storage_shape)
    private_axes: tuple[int, ...]
    scope: str


def _is_lanes(v: object) -> bool:
    return isinstance(v, np.ndarray) and v.ndim > 0


def _and_mask(mask: np.ndarray | None, cond: np.ndarray) -> np.ndarray:
    return cond if mask is None else mask & cond


_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "floormod": lambda a, b: a % b,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
}
_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}


def _call(name: str, x, dtype: np.dtype):  # noqa: ANN001, ANN202
    one = dtype.type(1)
    if name == "rsqrt":
        return one / np.sqrt(x)
    if name == "sigmoid":
        return one / (one + np.exp(-x))
    if name == "erf":
        return np.asarray(scipy.special.erf(x), dtype=dtype)[()]
    return _INTRINSICS[name](x)


_INTRINSICS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
               "floor": np.floor, "ceil": np.ceil}


class _Machine:
    def __init__(self, func: Func, stores: dict[str, _Store], thread_order: str, seed: int, observable: set[str]):
        self.stores = stores
        self.thread_order = thread_order
        self.rng = np.random.default_rng(seed)
        self.plans = _plan(func, thread_order == "lockstep", observable)
        self.lane_shape: list[int] = []
        self.lane_kinds: list[str] = []
        self.consts: dict[int, object] = {}
        self.barrier_cache: dict[int, bool] = {}

    # ------------------------------------------------------------------ lanes
    def _iota(self, axis: int) -> np.ndarray:
        n = len(self.lane_shape)
        shape = [1] * (n + 1)
        shape[axis] = self.lane_shape[axis]
        return np.arange(self.lane_shape[axis]).reshape(shape)

    @staticmethod
    def _widen(v: object) -> object:
        return v[..., None, :] if _is_lanes(v) else v  # type: ignore[index]

    # ------------------------------------------------------------------ statements
    def exec(self, s: Stmt, env: dict[str, object], mask: np.ndarray | None) -> None:
        if isinstance(s, BufferStore):
            self._store(s, env, mask)
        elif isinstance(s, For):
            self._for(s, env, mask)
        elif isinstance(s, Block):
            self._block(s, env, mask)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.exec(x, env, mask)
        elif isinstance(s, IfThenElse):
            cond = self.eval(s.cond, env, mask)
            if not _is_lanes(cond):
                branch = s.then_body if bool(cond) else s.else_body
                if branch is not None:
                    self.exec(branch, env, mask)
                return
            for branch, m in ((s.then_body, cond), (s.else_body, ~cond)):
                m = _and_mask(mask, m)
                if branch is not None and m.any():
                    self.exec(branch, env, m)
        elif isinstance(s, Allocate):
            self._allocate(s, env, mask)
        elif isinstance(s, Barrier):
            return
        else:
            raise TypeError(f"interpret: unknown statement node {type(s).__name__}")

    def _for(self, s: For, env: dict[str, object], mask: np.ndarray | None) -> None:
        if s.kind in THREAD_KINDS and self.thread_order != "lockstep":
            self._threads(s, env, mask)
            return
        plan = self.plans[id(s)]
        work = math.prod(self.lane_shape) * s.extent * plan.work_factor
        if s.extent > 1 and (plan.forced or (plan.lane and work <= MAX_LANE_WORK)):
            self._lane_loop(s, plan, env, mask)
            return
        name = s.var.name
        inner = dict(env)
        for v in range(s.extent):
            inner[name] = v
            self.exec(s.body, inner, mask)

    def _lane_loop(self, s: For, plan: _LoopPlan, env: dict[str, object], mask: np.ndarray | None) -> None:
        axis = len(self.lane_shape)
        inner = {k: self._widen(v) for k, v in env.items()}
        self.lane_shape.append(s.extent)
        self.lane_kinds.append(s.kind)
        inner[s.var.name] = self._iota(axis)
        saved = {}
        for name in plan.private:
            st = saved[name] = self.stores[name]
            k = len(st.private_axes)
            copies = np.repeat(np.expand_dims(st.array, k), s.extent, axis=k)
            self.stores[name] = _Store(copies, (*st.private_axes, axis), st.scope)
        try:
            self.exec(s.body, inner, self._widen(mask))  # type: ignore[arg-type]
        finally:
            self.stores.update(saved)
            self.lane_shape.pop()
            self.lane_kinds.pop()

    def _block(self, s: Block, env: dict[str, object], mask: np.ndarray | None) -> None:
        inner = dict(env)
        for iv, b in zip(s.iter_vars, s.bindings):
            inner[iv.var.name] = self.eval(b, env, mask)
        if not (isinstance(s.predicate, Const) and s.predicate.value is True):
            pred = self.eval(s.predicate, inner, mask)
            if not _is_lanes(pred):
                if not bool(pred):
                    return
            else:
                mask = _and_mask(mask, pred)
                if not mask.any():
                    return
        if s.init is not None:
            first: object = True
            for iv in s.iter_vars:
                if iv.kind == "reduce":
                    first = np.logical_and(first, np.equal(inner[iv.var.name], 0))
            if not _is_lanes(first):
                if bool(first):
                    self.exec(s.init, inner, mask)
            else:
                m = _and_mask(mask, first)  # type: ignore[arg-type]
                if m.any():
                    self.exec(s.init, inner, m)
        self.exec(s.body, inner, mask)

    def _allocate(self, s: Allocate, env: dict[str, object], mask: np.ndarray | None) -> None:
        self._with_storage(s.buffer, lambda: self.exec(s.body, env, mask))

    def _with_storage(self, b: Buffer, run: Callable[[], None]) -> None:
        """Run `run` with fresh poisoned storage for `b`: one copy per lane (shared: per block)."""
        axes = tuple(a for a, kind in enumerate(self.lane_kinds)
                     if not (b.scope == "shared" and kind in THREAD_KINDS))
        shape = (*(self.lane_shape[a] for a in axes), *b.storage_shape)
        saved = self.stores.get(b.name)
        self.stores[b.name] = _Store(_poisoned(shape, b.dtype.numpy), axes, b.scope)
        try:
            run()
        finally:
            if saved is None:
                del self.stores[b.name]
            else:
                self.stores[b.name] = saved

    # ------------------------------------------------------------------ memory
    def _indices(self, buf: Buffer, st: _Store, idx: list, mask: np.ndarray | None, what: str) -> tuple:
        for d, (v, n) in enumerate(zip(idx, buf.shape)):
            if _is_lanes(v):
                bad = (v < 0) | (v >= n)
                if bad.any():
                    active = bad if mask is None else bad & mask
                    if active.any():
                        first = np.broadcast_to(v, active.shape)[active].flat[0]
                        raise IndexError(f"{what} {buf.name}: index {int(first)} is out of bounds for "
                                         f"dimension {d} of extent {n}")
                    idx[d] = np.where(bad, 0, v)
            else:
                if not 0 <= int(v) < n:  # type: ignore[call-overload]
                    if mask is None or mask.any():
                        raise IndexError(f"{what} {buf.name}: index {int(v)} is out of bounds for "  # type: ignore[call-overload]
                                         f"dimension {d} of extent {n}")
                    idx[d] = 0
        return (*(self._iota(a) for a in st.private_axes), *idx)

    def _store_of(self, buf: Buffer) -> _Store:
        try:
            return self.stores[buf.name]
        except KeyError:
            raise LoweringError(f"interpret: buffer {buf.name} is used outside its Allocate") from None

    def _load(self, e: BufferLoad, env: dict[str, object], mask: np.ndarray | None) -> object:
        st = self._store_of(e.buffer)
        idx = [self.eval(i, env, mask) for i in e.indices]
        return st.array[self._indices(e.buffer, st, idx, mask, "load from")]

    def _store(self, s: BufferStore, env: dict[str, object], mask: np.ndarray | None) -> None:
        st = self._store_of(s.buffer)
        value = self.eval(s.value, env, mask)
        idx = [self.eval(i, env, mask) for i in s.indices]
        full = self._indices(s.buffer, st, idx, mask, "store to")
        if mask is None and not _is_lanes(value) and not any(_is_lanes(i) for i in full):
            st.array[full] = value
            return
        parts = np.broadcast_arrays(*full, value, *(() if mask is None else (mask,)))
        if mask is None:
            st.array[tuple(parts[:-1])] = parts[-1]
        else:
            m = parts[-1]
            st.array[tuple(p[m] for p in parts[:-2])] = parts[-2][m]

    # ------------------------------------------------------------------ expressions
    def eval(self, e: Expr, env: dict[str, object], mask: np.ndarray | None) -> object:
        t = type(e)
        if t is Var:
            return env[e.name]  # type: ignore[attr-defined]
        if t is Const:
            return self._const(e)  # type: ignore[arg-type]
        if t is BinOp:
            a = self.eval(e.a, env, mask)  # type: ignore[attr-defined]
            b = self.eval(e.b, env, mask)  # type: ignore[attr-defined]
            return self._binary(e, a, b)  # type: ignore[arg-type]
        if t is BufferLoad:
            return self._load(e, env, mask)  # type: ignore[arg-type]
        if t is Cmp:
            return _COMPARE[e.op](self.eval(e.a, env, mask), self.eval(e.b, env, mask))  # type: ignore[attr-defined]
        if t is Select:
            return self._select(e, env, mask)  # type: ignore[arg-type]
        if t is Cast:
            v = self.eval(e.value, env, mask)  # type: ignore[attr-defined]
            return np.asarray(v).astype(e.dtype.numpy)[()]
        if t is Call:
            x = self.eval(e.args[0], env, mask)  # type: ignore[attr-defined]
            return _call(e.name, x, e.dtype.numpy)  # type: ignore[attr-defined]
        if t is Not:
            return np.logical_not(self.eval(e.a, env, mask))  # type: ignore[attr-defined]
        if t is Ramp:
            base = self.eval(e.base, env, mask)  # type: ignore[attr-defined]
            return base + np.arange(e.lanes) * e.stride  # type: ignore[attr-defined,operator]
        if t is Broadcast:
            return self.eval(e.value, env, mask)  # type: ignore[attr-defined]
        raise TypeError(f"interpret: {t.__name__} cannot appear in the loop IR")

    def _const(self, e: Const) -> object:
        v = self.consts.get(id(e))
        if v is None:
            kind = e.dtype.kind
            v = e.dtype.numpy.type(e.value) if kind == "float" else bool(e.value) if kind == "bool" else int(e.value)
            self.consts[id(e)] = v
        return v

    @staticmethod
    def _binary(e: BinOp, a: object, b: object) -> object:
        op = e.op
        if op == "div":
            return a // b if e.dtype.is_int else a / b  # type: ignore[operator]
        if op in ("and", "or"):
            if e.dtype.kind == "bool":
                return (np.logical_and if op == "and" else np.logical_or)(a, b)
            return (a & b) if op == "and" else (a | b)  # type: ignore[operator]
        return _BINARY[op](a, b)

    def _select(self, e: Select, env: dict[str, object], mask: np.ndarray | None) -> object:
        cond = self.eval(e.cond, env, mask)
        if not _is_lanes(cond):
            return self.eval(e.true_value if bool(cond) else e.false_value, env, mask)
        # Each branch is evaluated only where it is taken, so a guarded load stays in bounds.
        t = self.eval(e.true_value, env, _and_mask(mask, cond))
        f = self.eval(e.false_value, env, _and_mask(mask, ~cond))
        return np.where(cond, t, f)

    # ------------------------------------------------------------------ GPU threads, one at a time
    def _threads(self, s: For, env: dict[str, object], mask: np.ndarray | None) -> None:
        chain = [s]
        while isinstance(chain[-1].body, For) and chain[-1].body.kind in THREAD_KINDS:
            chain.append(chain[-1].body)
        combos = itertools.product(*(range(lp.extent) for lp in chain))
        envs = [dict(env, **{lp.var.name: v for lp, v in zip(chain, c)}) for c in combos]
        block = _ThreadBlock(self, envs, mask)
        block.walk(chain[-1].body, {})
        block.flush()

    def has_barrier(self, s: Stmt) -> bool:
        hit = self.barrier_cache.get(id(s))
        if hit is None:
            hit = self.barrier_cache[id(s)] = any(isinstance(x, Barrier) for x in walk_stmts(s))
        return hit


class _ThreadBlock:
    """The threads of one GPU block, run one after another between barriers.

    Statements without a barrier are queued (with the values of the loops around them that
    contain barriers); a barrier runs the queue in every thread in turn, thread by thread. A
    loop containing barriers is unrolled, so the phase after its last barrier continues into
    the next iteration, as on a GPU. Local buffers Allocate'd around barriers get one copy per
    thread (an Allocate between barriers runs inside each thread anyway).
    """

    def __init__(self, machine: _Machine, envs: list[dict[str, object]], mask: np.ndarray | None):
        self.m = machine
        self.envs = envs
        self.mask = mask
        self.own: list[dict[str, _Store]] = [{} for _ in envs]
        self.per_thread: set[str] = set()  # local buffers Allocate'd around barriers
        self.queue: list[tuple[Stmt, dict[str, object]]] = []

    def walk(self, s: Stmt, binds: dict[str, object]) -> None:
        if not self.m.has_barrier(s):
            self.queue.append((s, binds))
        elif isinstance(s, Barrier):
            self.flush()
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

            self.m._with_storage(s.buffer, run)
            self.per_thread.discard(name)
            for o in self.own:
                o.pop(name, None)
        else:
            raise LoweringError(f"interpret: a barrier inside a {type(s).__name__} cannot be run thread by thread")

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
                    mine = self.own[t][name] = _Store(st.array.copy(), st.private_axes, st.scope)
                saved[name] = stores[name]
                stores[name] = mine
            try:
                for stmt, binds in self.queue:
                    self.m.exec(stmt, {**self.envs[t], **binds}, self.mask)
            finally:
                stores.update(saved)
        self.queue = []


__all__ = ["interpret", "run_func", "THREAD_ORDERS"]
