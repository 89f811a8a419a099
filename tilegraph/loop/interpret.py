"""interpret: the executable meaning of the loop IR, on numpy arrays.

    C = tg.interpret(sch, A, B)                    # a Schedule, a Func or a Workload
    run_func(func, {"A": A, "B": B, "C": C})       # in place, caller-managed buffers

Semantics (see tilegraph.loop.ir): a loop runs its body for var = 0 .. extent-1 whatever its
kind; a block binds its variables, is skipped where its predicate is false and runs `init`
first in the instance where every reduce variable is 0. Float arithmetic happens in the buffer
dtype (float32 stays float32); bfloat16 is a storage type (uint16 bits in memory) whose values
are float32 numbers, every operation on them rounded back to bfloat16 (dtype.bfloat16_bits:
to nearest, ties to even), and bfloat16 arrays pass in and out as ml_dtypes.bfloat16. Outputs,
allocs and Allocate'd buffers start poisoned (NaN, or the most negative integer), so elements
nobody wrote show up. An out-of-bounds index raises IndexError naming the buffer (numpy's
negative-index wrap-around is never used).

Speed comes from lanes: a loop whose iterations are independent becomes a numpy axis
("lane axis") and every expression under it is evaluated for all its iterations at once.

    for i in range(64):                     i = arange(64)[:, None, None]    (lane axis 0)
      for j in range(48):          ==>      j = arange(48)[None, :, None]    (lane axis 1)
        for k in range(37):                 for k in 0..36: C[i, j] = C[i, j] + A[i, k] * B[k, j]
          C[i, j] += A[i, k] * B[k, j]          (one vectorised statement per k)

Values are 0-d scalars or arrays right-aligned to (*lane_shape, vector_lanes): the last axis
holds Ramp/Broadcast lanes (size 1 for scalars). Which loops may be lane loops, and which
intermediates get one private copy per lane, is decided statically by tilegraph.loop.lanes.
Guards (block predicates, ifs, select branches) become lane masks.
Each output element sees the same operations in the same order as in serial execution.

A threadIdx.x loop driving a reduction (a cross-thread reduction, schedule/primitives/annotate.py)
means that reduction over its lanes: it runs as the serial loop (lowering turns it into per-lane
partial results and an AllReduce, which the interpreter runs as threads).

GPU thread loops (threadIdx.*, vthread): with thread_order="lockstep" a thread loop containing
barriers is always a lane loop, so a statement finishes in every thread before the next starts
(shared buffers per block, local ones per thread); without barriers it is an ordinary loop. With
"serial", "reversed" or "random", the threads of a block run one after another from barrier to
barrier (tilegraph.loop.interpret_gpu), so a missing barrier gives wrong results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tilegraph.dtype import DType, bfloat16_bits, bfloat16_values, poisoned, round_bfloat16, round_to, wrap_int
from tilegraph.errors import LoweringError
from tilegraph.loop.interpret_gpu import butterfly, run_threads
from tilegraph.loop.ir import (
    Allocate,
    AllReduce,
    Barrier,
    Block,
    Buffer,
    BufferStore,
    For,
    Func,
    IfThenElse,
    Prefetch,
    Seq,
    Stmt,
    TileProduct,
)
from tilegraph.loop.lanes import LoopPlan, determines, plan_loops
from tilegraph.loop.verify import THREAD_KINDS, verify
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Call, Cast, Cmp, Const, Expr, Not, Ramp, Select, Var

THREAD_ORDERS = ("lockstep", "serial", "reversed", "random")
# Lane loops are taken while lanes x private-buffer elements stay under this; else Python iterates.
MAX_LANE_WORK = 1 << 22
# The lane analysis under its names from before it moved to tilegraph.loop.lanes (tests use them).
_plan = plan_loops
_determines = determines


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
        buffers[b.name] = poisoned(b.storage_shape, b.dtype.numpy)
    run_func(func, buffers, thread_order=thread_order, seed=seed)
    results = tuple(_visible(buffers[b.name], b) for b in out_bufs)
    return results[0] if len(results) == 1 else results


def run_func(func: Func, buffers: dict[str, np.ndarray], thread_order: str = "lockstep", seed: int = 0) -> None:
    """Execute `func` in place on `buffers` (param name -> array of the buffer's shape or storage
    shape). Allocs missing from `buffers` are created poisoned."""
    if thread_order not in THREAD_ORDERS:
        raise ValueError(f"thread_order must be one of {THREAD_ORDERS}, got {thread_order!r}")
    verify(func)
    stores: dict[str, Store] = {}
    for b in func.buffers:
        arr = buffers.get(b.name)
        if arr is None and b in func.params:
            raise ValueError(f"buffers: no array for param {b.name} of {func.name}")
        if arr is None:
            arr = poisoned(_storage_shape(b), b.dtype.numpy)
        elif not isinstance(arr, np.ndarray) or arr.shape not in (b.shape, b.storage_shape):
            raise ValueError(f"buffers[{b.name!r}]: expected an array of shape {b.shape}, got {np.shape(arr)}")
        elif arr.dtype != b.dtype.numpy:
            raise TypeError(f"buffers[{b.name!r}]: expected dtype {b.dtype}, got {arr.dtype}")
        stores[b.name] = Store(arr, (), b.scope)
    observable = {b.name for b in func.params} | set(buffers)
    machine = Machine(func, stores, thread_order, seed, observable)
    with np.errstate(all="ignore"):
        machine.exec(func.body, {}, None)


def _as_func(obj: object) -> tuple[Func, int | None]:
    from tilegraph.te.workload import Workload

    func, workload = getattr(obj, "func", None), getattr(obj, "workload", None)
    if isinstance(func, Func) and isinstance(workload, Workload):  # a Schedule (the layer above)
        return func, len(workload.outputs)
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
    if b.dtype.holds(a.dtype):  # bfloat16 as ml_dtypes' type: its bits are the storage
        a = a.view(b.dtype.numpy)
    if a.dtype != b.dtype.numpy:
        raise TypeError(f"input {b.name}: expected dtype {b.dtype}, got {a.dtype}")
    if b.ndim == 1 and a.ndim > 1 and a.size == b.shape[0]:
        a = a.reshape(-1)  # a flattened (lowered) buffer takes the array in row-major order
    if a.shape != b.shape:
        raise ValueError(f"input {b.name}: expected shape {b.shape}, got {a.shape}")
    storage = poisoned(b.storage_shape, b.dtype.numpy)
    storage[tuple(slice(0, s) for s in b.shape)] = a
    return storage


def _storage_shape(b: Buffer) -> tuple[int, ...]:
    """A buffer of vector registers (dtype float32x16) stores each element's lanes on a last axis."""
    return (*b.storage_shape, b.dtype.lanes) if b.dtype.lanes > 1 else b.storage_shape


def _visible(arr: np.ndarray, b: Buffer) -> np.ndarray:
    return arr[tuple(slice(0, s) for s in b.shape)].copy().view(b.dtype.array_numpy)


# ============================================================================ execution


def _check_tile_index(buf: Buffer, index: np.ndarray, extent: int) -> None:
    bad = (index < 0) | (index >= extent)
    if bad.any():
        raise IndexError(f"tile_product on {buf.name}: index {int(index[bad].flat[0])} is out of bounds for "
                         f"dimension 0 of extent {extent}")


@dataclass
class Store:
    """A buffer's storage while the Func runs: one copy per private lane axis in front."""

    array: np.ndarray           # (*private lane dims, *storage_shape)
    private_axes: tuple[int, ...]
    scope: str


def _is_lanes(v: object) -> bool:
    return isinstance(v, np.ndarray) and v.ndim > 0


def _and_mask(mask: np.ndarray | None, cond: np.ndarray) -> np.ndarray:
    return cond if mask is None else mask & cond


_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "max": np.maximum,
           "min": np.minimum, "pow": np.power, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
           "bitxor": np.bitwise_xor, "shl": np.left_shift, "shr": np.right_shift}
_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}


def _floor_div_mod(op: str, a, b, dtype: DType):  # noqa: ANN001, ANN202
    """`//` and `%` as the IR defines them (te/expr.py): floor semantics; for integers
    `x // 0 == x % 0 == 0` and `INT_MIN // -1` wraps to INT_MIN; for floats `floor(a / b)` and
    numpy's mod (fmod moved to the divisor's sign), exactly what every printer emits."""
    if dtype.is_float:
        with np.errstate(all="ignore"):
            return np.floor(a / b) if op == "floordiv" else np.mod(a, b)
    if type(a) is int and type(b) is int:
        return 0 if b == 0 else wrap_int(a // b if op == "floordiv" else a % b, dtype)
    with np.errstate(all="ignore"):  # numpy already gives 0 for a zero divisor
        out = np.floor_divide(a, b) if op == "floordiv" else np.remainder(a, b)
    # Arrays of an int32/int64 buffer already wrap; index lanes (int64) never reach INT_MIN // -1.
    return _wrap_narrow(out, dtype) if dtype.bits in (8, 16) else out


def _wrap_narrow(value, dtype: DType):  # noqa: ANN001, ANN202
    """Two's-complement wrap of a numpy integer result into its 8- or 16-bit IR dtype (a Python-int
    operand or an int64 index lane makes numpy compute wider)."""
    arr = np.asarray(value)
    if arr.dtype == dtype.numpy:
        return value
    with np.errstate(all="ignore"):
        wrapped = arr.astype(np.int64).astype(dtype.numpy)
    return wrapped if _is_lanes(value) else wrapped[()]


def _bfloat16(value):  # noqa: ANN001, ANN202
    """A float32 result of an operation on bfloat16 values, rounded back to bfloat16 (bfloat16
    arithmetic is float32 arithmetic rounded after every operation, as every printer emits it)."""
    return round_bfloat16(value)[()]


def _call(name: str, x, dtype: np.dtype):  # noqa: ANN001, ANN202
    one = dtype.type(1)
    if name == "rsqrt":
        return one / np.sqrt(x)
    if name == "sigmoid":
        return one / (one + np.exp(-x))
    if name == "erf":
        from scipy.special import erf  # here: scipy.special costs ~0.4 s to import, and few programs use erf

        return np.asarray(erf(x), dtype=dtype)[()]
    return _INTRINSICS[name](x)


_INTRINSICS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
               "floor": np.floor, "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
               "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
               "acosh": np.arccosh, "atanh": np.arctanh, "round": np.rint}


class Machine:
    """Executes statements on numpy lanes; one per run_func call."""

    def __init__(self, func: Func, stores: dict[str, Store], thread_order: str, seed: int, observable: set[str]):
        self.stores = stores
        self.thread_order = thread_order
        self.rng = np.random.default_rng(seed)
        self.plans = plan_loops(func, thread_order == "lockstep", observable)
        self.lane_shape: list[int] = []
        self.lane_kinds: list[str] = []
        self.consts: dict[int, object] = {}
        self.barrier_cache: dict[int, bool] = {}  # id(stmt) -> contains a Barrier (interpret_gpu)

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
        elif isinstance(s, (Barrier, Prefetch)):  # a prefetch is a hint: it reads and changes nothing
            return
        elif isinstance(s, AllReduce):
            self._all_reduce_lanes(s, mask)
        elif isinstance(s, TileProduct):
            self._tile_product(s, env, mask)
        else:
            raise TypeError(f"interpret: unknown statement node {type(s).__name__}")

    def _for(self, s: For, env: dict[str, object], mask: np.ndarray | None) -> None:
        if s.kind in THREAD_KINDS and self.thread_order != "lockstep" and not self.plans[id(s)].cross_thread_reduction:
            run_threads(self, s, env, mask)
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

    def _lane_loop(self, s: For, plan: LoopPlan, env: dict[str, object], mask: np.ndarray | None) -> None:
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
            self.stores[name] = Store(copies, (*st.private_axes, axis), st.scope)
        try:
            self.exec(s.body, inner, self._widen(mask))  # type: ignore[arg-type]
        finally:
            self.stores.update(saved)
            self.lane_shape.pop()
            self.lane_kinds.pop()

    def _all_reduce_lanes(self, s: AllReduce, mask: np.ndarray | None) -> None:
        """Lockstep: the threadIdx.x lanes are an axis of the buffer's per-thread copies."""
        if s.width == 1:
            return
        if mask is not None and not np.all(mask):
            raise LoweringError(f"interpret: allreduce({s.buffer.name}) under a guard that differs between threads")
        axes = [a for a, kind in enumerate(self.lane_kinds) if kind == "threadIdx.x"]
        st = self._store_of(s.buffer)
        if not axes or axes[-1] not in st.private_axes:
            raise LoweringError(f"interpret: allreduce({s.buffer.name}) needs a per-thread buffer inside a threadIdx.x loop")
        k = st.private_axes.index(axes[-1])
        st.array[...] = butterfly(st.array, k, s.combiner, s.width)

    def _tile_product(self, s: TileProduct, env: dict[str, object], mask: np.ndarray | None) -> None:
        """TileProduct's meaning (loop/ir.py): the exact sum of every product added to each
        accumulator once. Never under lane loops (tilegraph.loop.lanes keeps the loops around it
        serial), so its tile origins are scalars."""
        origins = [self.eval(e, env, mask) for e in (s.acc_at, s.a_at, s.b_at)]
        if any(_is_lanes(o) for o in origins) or _is_lanes(mask):
            raise LoweringError("interpret: a tile_product under lane loops (internal error: lanes.py keeps them serial)")
        acc_at, a_at, b_at = (int(o) for o in origins)  # type: ignore[call-overload]
        step_a, step_b = np.zeros(1, np.int64), np.zeros(1, np.int64)
        for extent, sa, sb in s.steps:  # every point of the step nest, outermost first
            step_a = (step_a[:, None] + np.arange(extent) * sa).reshape(-1)
            step_b = (step_b[:, None] + np.arange(extent) * sb).reshape(-1)
        a_rows = np.concatenate([offset + np.arange(rows) * s.a_ld for rows, offset in s.a_tiles])
        k, n, m = np.arange(s.depth), np.arange(s.cols), np.arange(s.rows)
        a_index = a_at + step_a[:, None, None] + a_rows[None, :, None] + k[None, None, :]
        b_index = b_at + step_b[:, None, None] + ((k // s.group) * s.b_ld + k % s.group)[None, :, None] \
            + (n * s.group)[None, None, :]
        acc_index = acc_at + m[:, None] * s.acc_ld + n[None, :]
        floats = s.acc.dtype.is_float
        a, b = (self._tile_operand(buf, index, floats) for buf, index in ((s.a, a_index), (s.b, b_index)))
        total = np.einsum("smk,skn->mn", a, b)
        acc = self._store_of(s.acc).array
        _check_tile_index(s.acc, acc_index, acc.shape[-1])
        start = 0 if s.zero else acc[acc_index].astype(np.float64 if floats else np.int64)
        if floats:
            acc[acc_index] = (start + total).astype(acc.dtype)
        else:
            acc[acc_index] = ((start + total + 2**31) % 2**32 - 2**31).astype(acc.dtype)

    def _tile_operand(self, buf: Buffer, index: np.ndarray, floats: bool) -> np.ndarray:
        array = self._store_of(buf).array
        _check_tile_index(buf, index, array.shape[-1])
        values = array[index]
        if buf.dtype.name == "bfloat16":
            values = bfloat16_values(values)
        return values.astype(np.float64 if floats else np.int64)

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
        self.with_storage(s.buffer, lambda: self.exec(s.body, env, mask))

    def with_storage(self, b: Buffer, run: Callable[[], None]) -> None:
        """Run `run` with fresh poisoned storage for `b`: one copy per lane (shared: per block)."""
        axes = tuple(a for a, kind in enumerate(self.lane_kinds)
                     if not (b.scope == "shared" and kind in THREAD_KINDS))
        shape = (*(self.lane_shape[a] for a in axes), *_storage_shape(b))
        saved = self.stores.get(b.name)
        self.stores[b.name] = Store(poisoned(shape, b.dtype.numpy), axes, b.scope)
        try:
            run()
        finally:
            if saved is None:
                del self.stores[b.name]
            else:
                self.stores[b.name] = saved

    # ------------------------------------------------------------------ memory
    def _indices(self, buf: Buffer, st: Store, idx: list, mask: np.ndarray | None, what: str) -> tuple:
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

    def _store_of(self, buf: Buffer) -> Store:
        try:
            return self.stores[buf.name]
        except KeyError:
            raise LoweringError(f"interpret: buffer {buf.name} is used outside its Allocate") from None

    def _load(self, e: BufferLoad, env: dict[str, object], mask: np.ndarray | None) -> object:
        st = self._store_of(e.buffer)
        idx = [self.eval(i, env, mask) for i in e.indices]
        value = st.array[self._indices(e.buffer, st, idx, mask, "load from")]
        return bfloat16_values(value)[()] if e.buffer.dtype.name == "bfloat16" else value

    def _store(self, s: BufferStore, env: dict[str, object], mask: np.ndarray | None) -> None:
        st = self._store_of(s.buffer)
        value = self.eval(s.value, env, mask)
        if s.buffer.dtype.name == "bfloat16":  # the value is already a bfloat16 number: this is exact
            value = bfloat16_bits(value)[()]
        idx = [self.eval(i, env, mask) for i in s.indices]
        full = self._indices(s.buffer, st, idx, mask, "store to")
        if s.buffer.dtype.lanes > 1 and not any(_is_lanes(i) for i in full):
            # a vector register (promote_registers): the element at `full` is a whole vector
            st.array[full] = value if mask is None else np.where(mask, value, st.array[full])
            return
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
            out = self._binary(e, a, b)  # type: ignore[arg-type]
            return _bfloat16(out) if e.dtype.name == "bfloat16" else out  # type: ignore[attr-defined]
        if t is BufferLoad:
            return self._load(e, env, mask)  # type: ignore[arg-type]
        if t is Cmp:
            return _COMPARE[e.op](self.eval(e.a, env, mask), self.eval(e.b, env, mask))  # type: ignore[attr-defined]
        if t is Select:
            return self._select(e, env, mask)  # type: ignore[arg-type]
        if t is Cast:
            v = self.eval(e.value, env, mask)  # type: ignore[attr-defined]
            out = np.asarray(v).astype(e.dtype.value_numpy)[()]  # type: ignore[attr-defined]
            return _bfloat16(out) if e.dtype.name == "bfloat16" else out  # type: ignore[attr-defined]
        if t is Call and e.name == "bf16_dot2":  # type: ignore[attr-defined]
            # lower/passes/pair_bf16_products.py: acc + a0*b0 + a1*b1, products exact, added in this order
            acc, a0, a1, b0, b1 = (self.eval(x, env, mask) for x in e.args)  # type: ignore[attr-defined]
            return (acc + a0 * b0) + a1 * b1
        if t is Call and e.name == "u8s8_dot4":  # type: ignore[attr-defined]
            # lower/passes/group_int8_products.py: acc + a0*b0 + .. + a3*b3 in int32, wrapping
            acc, *ab = (np.asarray(self.eval(x, env, mask), np.int64) for x in e.args)  # type: ignore[attr-defined]
            total = acc + ab[0] * ab[4] + ab[1] * ab[5] + ab[2] * ab[6] + ab[3] * ab[7]
            return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
        if t is Call:
            x = self.eval(e.args[0], env, mask)  # type: ignore[attr-defined]
            out = _call(e.name, x, e.dtype.value_numpy)  # type: ignore[attr-defined]
            return _bfloat16(out) if e.dtype.name == "bfloat16" else out  # type: ignore[attr-defined]
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
            v = e.dtype.value_numpy.type(round_to(e.value, e.dtype)) if kind == "float" else \
                bool(e.value) if kind == "bool" else int(e.value)
            self.consts[id(e)] = v
        return v

    @staticmethod
    def _binary(e: BinOp, a: object, b: object) -> object:
        op = e.op
        if op in ("floordiv", "floormod"):
            return _floor_div_mod(op, a, b, e.dtype)
        if op == "div":
            if not e.dtype.is_float:
                raise TypeError(f"'/' on {e.dtype} has no meaning in the IR (use '//', floor division)")
            return a / b  # type: ignore[operator]
        if op in ("and", "or"):
            if e.dtype.kind == "bool":
                return (np.logical_and if op == "and" else np.logical_or)(a, b)
            return (a & b) if op == "and" else (a | b)  # type: ignore[operator]
        out = _BINARY[op](a, b)
        if not e.dtype.is_int:
            return out
        if type(out) is int:  # both operands were Python ints: wrap as the fixed-width type does
            return wrap_int(out, e.dtype)
        return _wrap_narrow(out, e.dtype) if e.dtype.bits == 8 else out

    def _select(self, e: Select, env: dict[str, object], mask: np.ndarray | None) -> object:
        cond = self.eval(e.cond, env, mask)
        if not _is_lanes(cond):
            return self.eval(e.true_value if bool(cond) else e.false_value, env, mask)
        # Each branch is evaluated only where it is taken, so a guarded load stays in bounds.
        t = self.eval(e.true_value, env, _and_mask(mask, cond))
        f = self.eval(e.false_value, env, _and_mask(mask, ~cond))
        return np.where(cond, t, f)


__all__ = ["interpret", "run_func", "THREAD_ORDERS"]
