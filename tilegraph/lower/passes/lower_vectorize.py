"""lower_vectorize: a `vectorized` loop becomes vector statements (GCC vector extensions).

The loop is cut into chunks of the target's lanes (widths 16/8/4 for 32-bit types); each chunk
is one vector statement per store, the leftover (< 4 iterations) a scalar loop:

    for j in range(13) vectorized:              C[ramp(i*13, 1, 8)] = A[ramp(i*13, 1, 8)] + broadcast(B[i], 8)
      C[i*13 + j] = A[i*13 + j] + B[i]    ==>   C[ramp(i*13 + 8, 1, 4)] = A[ramp(i*13 + 8, 1, 4)] + broadcast(B[i], 4)
                                                C[i*13 + 12] = A[i*13 + 12] + B[i]

Stores must be stride 1 in the loop variable; stride-1 loads become vector loads, invariant
expressions broadcasts, other affine strides gathers (`ramp` with that stride). A guard that is
an interval in the variable (the tail of a non-dividing split) is tested at both ends of each
chunk: `if (all lanes pass) vector statement else scalar loop over the chunk`.

Math calls (exp, log, tanh, ...) become vector calls (the printer emits SIMD helpers for them),
float32/int32/bfloat16 casts vector conversions, and a select whose condition depends on the
variable a lane mask and a blend. 8-bit integers are computed in int32 lanes: loads widen them
(Cast(int32|float32, X[ramp]), a gather when the ramp is strided), stores keep each lane's low 8 bits (a conversion, a load or a
select of them, stored to a uint8/int8 buffer), and a conversion through 8 bits and back wraps:

    Y[i*16 + j] = select(X[i*16 + j] > 0, X[i*16 + j], exp(X[i*16 + j]))
    ==>  Y[ramp(i*16, 1, 16)] = select(X[ramp(i*16, 1, 16)] > broadcast(0, 16), X[ramp(..)], exp(X[ramp(..)]))

    U[i] = uint8(int32(Q[i]) + 128)           (Q int8)
    ==>  U[ramp(0, 1, 16)] = uint8(int32(Q[ramp(0, 1, 16)]) + broadcast(128, 16))   (a widening load, a narrowing store)

A blend evaluates both branches on every lane, so a load under such a select is allowed only
where its index is provably inside its buffer for every lane (a guarded load of padding is not).
Anything else (other conditions on the variable, the variable used as a value, non-affine
indices, types other than float32/int32/bfloat16) keeps a scalar loop marked `vectorized`, which the
printer emits with `#pragma GCC ivdep` for the C compiler to vectorise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tilegraph import dtype as dt
from tilegraph.loop.edit import substitute_stmt, transform_with_ranges
from tilegraph.loop.ir import BufferStore, For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.lower.passes.common import Bounds, all_loop_names, bounds, lanes_of, linear_in, uses
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Call, Cast, Cmp, Const, Expr, Not, Ramp, Select, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, walk

VECTOR_WIDTHS = (16, 8, 4)
VECTOR_TYPES = (dt.float32, dt.int32)  # what vector registers hold (promote_registers)
# what vector statements compute on: bfloat16 lanes are float vectors, loaded and stored as bits
VECTOR_VALUE_TYPES = (*VECTOR_TYPES, dt.bfloat16)
# 8-bit integers enter vector statements widened as they load (Cast(int32|float32, X[ramp(b, 1, n)]))
# and leave narrowed as they store (Y[ramp(b, 1, n)] = Cast(uint8|int8, int32 lanes))
WIDENED_LOADS = (dt.uint8, dt.int8)
VECTOR_CALLS = ("exp", "log", "tanh", "sigmoid", "erf", "sqrt", "rsqrt", "abs", "floor", "ceil", "sin", "cos", "tan",
                "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "round")
_VECTOR_OPS = {"add", "sub", "mul", "div", "max", "min"}


class _Fallback(Exception):
    """The loop body cannot be expressed with vector statements."""


@dataclass(frozen=True)
class _Chunk:
    """The lanes start..start+lanes-1 of the loop variable `var`, inside loops with `ranges`."""

    var: Var
    start: int
    lanes: int
    ranges: Mapping[str, Bounds]


def run(func: Func, target: object) -> Func:
    taken = all_loop_names(func.body)
    max_lanes = _max_lanes(target)

    def on_stmt(s: Stmt, ranges: dict[str, Bounds]) -> Stmt | None:
        if isinstance(s, For) and s.kind == "vectorized":
            return vectorize_loop(s, max_lanes, taken, ranges)
        return None

    return replace(func, body=transform_with_ranges(func.body, on_stmt))


def _max_lanes(target: object) -> int:
    bits = getattr(target, "vector_bits", None) or 128
    lanes = bits // 32
    return max((w for w in VECTOR_WIDTHS if w <= lanes), default=4)


def chunk_widths(extent: int, max_lanes: int) -> list[int]:
    """Vector widths covering a prefix of `extent`; the rest (< 4) stays scalar."""
    widths: list[int] = []
    left = extent
    while left >= VECTOR_WIDTHS[-1]:
        w = next(w for w in VECTOR_WIDTHS if w <= min(left, max_lanes))
        widths.append(w)
        left -= w
    return widths


def vectorize_loop(loop: For, max_lanes: int, taken: set[str], ranges: Mapping[str, Bounds] | None = None) -> Stmt:
    """`loop` as vector chunks plus a scalar tail, or unchanged when its body cannot be vectorised.
    `ranges` (of the enclosing loop variables) lets loads under lane-dependent selects be proven
    in bounds; without it such selects fall back."""
    widths = chunk_widths(loop.extent, max_lanes)
    if not widths:
        return loop
    try:
        chunks: list[Stmt] = []
        start = 0
        for w in widths:
            chunks.append(_vector_stmt(loop.body, _Chunk(loop.var, start, w, ranges or {}), taken))
            start += w
    except _Fallback:
        return loop
    tail = loop.extent - start
    if tail:
        name = fresh_name(f"{loop.var.name}_tail", taken)
        taken.add(name)
        tvar = Var(name, loop.var.dtype)
        chunks.append(For(tvar, tail, "vectorized", substitute_stmt(loop.body, {loop.var: tvar + start})))
    return seq(*chunks)


def _vector_stmt(s: Stmt, c: _Chunk, taken: set[str]) -> Stmt:
    v = c.var
    if isinstance(s, Seq):
        return Seq(tuple(_vector_stmt(x, c, taken) for x in s.stmts))
    if isinstance(s, IfThenElse):
        if uses(s.cond, v):
            return _guarded_chunk(s, c, taken)
        other = None if s.else_body is None else _vector_stmt(s.else_body, c, taken)
        return IfThenElse(s.cond, _vector_stmt(s.then_body, c, taken), other)
    if not isinstance(s, BufferStore):
        raise _Fallback
    narrow = s.buffer.dtype in WIDENED_LOADS
    if (s.buffer.dtype not in VECTOR_VALUE_TYPES and not narrow) or len(s.indices) != 1:
        raise _Fallback
    form = linear_in(s.indices[0], v)
    if form is None or form[0] != 1:
        raise _Fallback
    base = simplify(form[1] + Const(c.start))
    if narrow:  # computed in int32 lanes, each truncated to its low 8 bits as it is stored (C's conversion)
        value = Cast(s.buffer.dtype, _widen(_as_int32_lanes(s.value, c), c.lanes))
    else:
        value = _widen(_vector_expr(s.value, c), c.lanes)
    return BufferStore(s.buffer, (Ramp(base, 1, c.lanes),), value)


def _as_int32_lanes(e: Expr, c: _Chunk) -> Expr:
    """An 8-bit integer expression as int32 lanes holding the same values (loads widen as they
    load; a conversion to 8 bits keeps its operand's low 8 bits, _wrapped_to)."""
    if isinstance(e, Const):
        return Const(e.value, dt.int32)
    if isinstance(e, Cast) and e.value.dtype in VECTOR_TYPES:
        inner = _vector_operand(e.value, c) if uses(e.value, c.var) else e.value
        return inner if inner.dtype.scalar == dt.int32 else Cast(dt.int32, inner)
    if isinstance(e, BufferLoad) and e.buffer.dtype in WIDENED_LOADS:
        return _vector_expr(Cast(dt.int32, e), c)
    if isinstance(e, Select) and e.dtype in WIDENED_LOADS:
        return _blend(e, _widen(_as_int32_lanes(e.true_value, c), c.lanes),
                      _widen(_as_int32_lanes(e.false_value, c), c.lanes), c)
    raise _Fallback


def _blend(e: Select, t: Expr, f: Expr, c: _Chunk) -> Expr:
    """`e` over the chunk with its branches vectorised as `t` and `f`: a plain select when the
    condition is invariant, else a lane-mask blend (every lane evaluates both branches, so each
    load in them must be inside its buffer)."""
    if not uses(e.cond, c.var):
        return Select(e.cond, t, f)
    if not all(_load_in_bounds(x, c) for branch in (e.true_value, e.false_value) for x in walk(branch)
               if isinstance(x, BufferLoad)):
        raise _Fallback
    return Select(_vector_mask(e.cond, c), t, f)


def _wrapped_to(narrow: dt.DType, e: Expr) -> Expr:
    """int32 lanes `e` as the 8-bit type `narrow` leaves them, still int32: uint8 keeps the low
    byte (e & 255), int8 sign-extends it (((e + 128) & 255) - 128)."""
    def k(value: int) -> Expr:
        return _widen(Const(value, dt.int32), lanes_of(e))

    if narrow == dt.uint8:
        return BinOp("bitand", e, k(255))
    return BinOp("sub", BinOp("bitand", BinOp("add", e, k(128)), k(255)), k(128))


def _guarded_chunk(s: IfThenElse, c: _Chunk, taken: set[str]) -> Stmt:
    """A guard on the lane (the tail of a non-dividing split): where it holds at both ends of the
    chunk it holds on every lane (it is an interval in `v`), so the chunk is one vector statement;
    otherwise a scalar loop over the chunk keeps the guard."""
    v = c.var
    if s.else_body is not None or not _is_interval_in(s.cond, v):
        raise _Fallback
    vector = _vector_stmt(s.then_body, c, taken)
    ends = [simplify(substitute(s.cond, {v: Const(c.start + k, v.dtype)})) for k in (0, c.lanes - 1)]
    name = fresh_name(f"{v.name}_lane", taken)
    taken.add(name)
    lane = Var(name, v.dtype)
    scalar = For(lane, c.lanes, "serial", substitute_stmt(s, {v: lane + c.start}))
    return IfThenElse(simplify(BinOp("and", ends[0], ends[1])), vector, scalar)


def _is_interval_in(cond: Expr, v: Var) -> bool:
    """`cond` is a conjunction of inequalities between expressions affine in `v`."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return _is_interval_in(cond.a, v) and _is_interval_in(cond.b, v)
    if isinstance(cond, Cmp) and cond.op in ("lt", "le", "gt", "ge"):
        return linear_in(cond.a, v) is not None and linear_in(cond.b, v) is not None
    return not uses(cond, v)


def _vector_expr(e: Expr, c: _Chunk) -> Expr:
    """`e` over the lanes of the chunk: a scalar when invariant, else a vector (a lane mask for
    conditions)."""
    if not uses(e, c.var):
        return e
    if e.dtype.kind == "bool":
        return _vector_mask(e, c)
    if e.dtype not in VECTOR_VALUE_TYPES:
        raise _Fallback
    if isinstance(e, BufferLoad):
        return _vector_load(e, c)
    if isinstance(e, BinOp) and e.op in _VECTOR_OPS:
        if e.op == "div" and not e.dtype.is_float:
            raise _Fallback
        return BinOp(e.op, _vector_operand(e.a, c), _vector_operand(e.b, c))
    if isinstance(e, Select):
        return _blend(e, _vector_operand(e.true_value, c), _vector_operand(e.false_value, c), c)
    if isinstance(e, Call) and e.name in VECTOR_CALLS and len(e.args) == 1:
        if not e.dtype.is_float and e.name != "abs":
            raise _Fallback
        return Call(e.name, (_vector_operand(e.args[0], c),), e.dtype)
    if isinstance(e, Cast) and e.value.dtype in VECTOR_VALUE_TYPES:
        return Cast(e.dtype, _vector_operand(e.value, c))
    if (isinstance(e, Cast) and e.dtype in (dt.int32, dt.float32) and isinstance(e.value, Cast)
            and e.value.dtype in WIDENED_LOADS and e.value.value.dtype in VECTOR_TYPES):
        # through 8 bits and back (a quantized value read as a number): truncated to int32, wrapped
        whole = _vector_operand(e.value.value, c)
        wrapped = _wrapped_to(e.value.dtype, whole if whole.dtype.scalar == dt.int32 else Cast(dt.int32, whole))
        return wrapped if e.dtype == dt.int32 else Cast(e.dtype, wrapped)
    if (isinstance(e, Cast) and e.dtype in (dt.int32, dt.float32) and isinstance(e.value, BufferLoad)
            and e.value.buffer.dtype in WIDENED_LOADS):
        # a strided ramp is a gather of bytes, or one operand of a dot-product step reading a copy
        # packed in K groups (lower/passes/dot_groups.py takes those)
        return Cast(e.dtype, _vector_load(e.value, c))
    raise _Fallback


def _vector_operand(e: Expr, c: _Chunk) -> Expr:
    return _widen(_vector_expr(e, c), c.lanes)


def _vector_mask(e: Expr, c: _Chunk) -> Expr:
    """A condition over the lanes as a lane mask: vector comparisons joined by and/or/not. An
    invariant condition inside a lane-dependent one becomes the mask `broadcast(int(cond)) != 0`
    (masks are int32 vectors in C, never broadcast bools)."""
    if not uses(e, c.var):
        as_int = Broadcast(Cast(dt.int32, e), c.lanes)
        return Cmp("ne", as_int, Broadcast(Const(0, dt.int32), c.lanes))
    if isinstance(e, Cmp):
        if e.a.dtype not in VECTOR_VALUE_TYPES:
            raise _Fallback
        return Cmp(e.op, _vector_operand(e.a, c), _vector_operand(e.b, c))
    if isinstance(e, BinOp) and e.op in ("and", "or"):
        return BinOp(e.op, _vector_mask(e.a, c), _vector_mask(e.b, c))
    if isinstance(e, Not):
        return Not(_vector_mask(e.a, c))
    raise _Fallback


def _vector_load(e: BufferLoad, c: _Chunk) -> Expr:
    if len(e.indices) != 1:
        raise _Fallback
    form = linear_in(e.indices[0], c.var)
    if form is None:
        raise _Fallback
    coefficient, rest = form
    base = simplify(rest + Const(coefficient * c.start))
    if coefficient == 0:
        return BufferLoad(e.buffer, (base,))
    return BufferLoad(e.buffer, (Ramp(base, coefficient, c.lanes),))


def _load_in_bounds(e: BufferLoad, c: _Chunk) -> bool:
    """Every lane of the chunk reads inside the buffer (so a blend may read it unconditionally)."""
    if len(e.indices) != 1:
        return False
    ranges = dict(c.ranges)
    ranges[c.var.name] = (c.start, c.start + c.lanes - 1)
    span = bounds(e.indices[0], ranges)
    return span is not None and span[0] >= 0 and span[1] < e.buffer.size


def _widen(e: Expr, lanes: int) -> Expr:
    return e if lanes_of(e) > 1 else Broadcast(e, lanes)
