"""lower_vectorize: a `vectorized` loop becomes vector statements (GCC vector extensions).

The loop is cut into chunks of the target's lanes (widths 16/8/4 for 32-bit types); each chunk
is one vector statement per store, the leftover (< 4 iterations) a scalar loop:

    for j in range(13) vectorized:              C[ramp(i*13, 1, 8)] = A[ramp(i*13, 1, 8)] + broadcast(B[i], 8)
      C[i*13 + j] = A[i*13 + j] + B[i]    ==>   C[ramp(i*13 + 8, 1, 4)] = A[ramp(i*13 + 8, 1, 4)] + broadcast(B[i], 4)
                                                C[i*13 + 12] = A[i*13 + 12] + B[i]

Stores must be stride 1 in the loop variable; stride-1 loads become vector loads, invariant
expressions broadcasts, other affine strides gathers (`ramp` with that stride). A guard that is
an interval in the variable (the tail of a non-dividing split) is tested at both ends of each
chunk: `if (all lanes pass) vector statement else scalar loop over the chunk`. Anything else
(other conditions or selects depending on the variable, math calls, casts, non-affine indices, types
other than float32/int32) keeps a scalar loop marked `vectorized`, which the printer emits with
`#pragma GCC ivdep` for the C compiler to vectorise.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph import dtype as dt
from tilegraph.loop.ir import BufferStore, For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import rewrite_stmt
from tilegraph.lower.passes.common import all_loop_names, lanes_of, linear_in, substitute_stmt, uses
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Cmp, Const, Expr, Ramp, Select, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute

VECTOR_WIDTHS = (16, 8, 4)
VECTOR_TYPES = (dt.float32, dt.int32)
_VECTOR_OPS = {"add", "sub", "mul", "div", "max", "min"}


class _Fallback(Exception):
    """The loop body cannot be expressed with vector statements."""


def run(func: Func, target: object) -> Func:
    taken = all_loop_names(func.body)
    max_lanes = _max_lanes(target)

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, For) and s.kind == "vectorized":
            return vectorize_loop(s, max_lanes, taken)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


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


def vectorize_loop(loop: For, max_lanes: int, taken: set[str]) -> Stmt:
    widths = chunk_widths(loop.extent, max_lanes)
    if not widths:
        return loop
    try:
        chunks: list[Stmt] = []
        start = 0
        for w in widths:
            chunks.append(_vector_stmt(loop.body, loop.var, start, w, taken))
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


def _vector_stmt(s: Stmt, v: Var, start: int, lanes: int, taken: set[str]) -> Stmt:
    if isinstance(s, Seq):
        return Seq(tuple(_vector_stmt(x, v, start, lanes, taken) for x in s.stmts))
    if isinstance(s, IfThenElse):
        if uses(s.cond, v):
            return _guarded_chunk(s, v, start, lanes, taken)
        other = None if s.else_body is None else _vector_stmt(s.else_body, v, start, lanes, taken)
        return IfThenElse(s.cond, _vector_stmt(s.then_body, v, start, lanes, taken), other)
    if not isinstance(s, BufferStore):
        raise _Fallback
    if s.buffer.dtype not in VECTOR_TYPES or len(s.indices) != 1:
        raise _Fallback
    form = linear_in(s.indices[0], v)
    if form is None or form[0] != 1:
        raise _Fallback
    base = simplify(form[1] + Const(start))
    value = _widen(_vector_expr(s.value, v, start, lanes), lanes)
    return BufferStore(s.buffer, (Ramp(base, 1, lanes),), value)


def _guarded_chunk(s: IfThenElse, v: Var, start: int, lanes: int, taken: set[str]) -> Stmt:
    """A guard on the lane (the tail of a non-dividing split): where it holds at both ends of the
    chunk it holds on every lane (it is an interval in `v`), so the chunk is one vector statement;
    otherwise a scalar loop over the chunk keeps the guard."""
    if s.else_body is not None or not _is_interval_in(s.cond, v):
        raise _Fallback
    vector = _vector_stmt(s.then_body, v, start, lanes, taken)
    ends = [simplify(substitute(s.cond, {v: Const(start + k, v.dtype)})) for k in (0, lanes - 1)]
    name = fresh_name(f"{v.name}_lane", taken)
    taken.add(name)
    lane = Var(name, v.dtype)
    scalar = For(lane, lanes, "serial", substitute_stmt(s, {v: lane + start}))
    return IfThenElse(simplify(BinOp("and", ends[0], ends[1])), vector, scalar)


def _is_interval_in(cond: Expr, v: Var) -> bool:
    """`cond` is a conjunction of inequalities between expressions affine in `v`."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return _is_interval_in(cond.a, v) and _is_interval_in(cond.b, v)
    if isinstance(cond, Cmp) and cond.op in ("lt", "le", "gt", "ge"):
        return linear_in(cond.a, v) is not None and linear_in(cond.b, v) is not None
    return not uses(cond, v)


def _vector_expr(e: Expr, v: Var, start: int, lanes: int) -> Expr:
    """`e` over the lanes start..start+lanes-1 of `v`: a scalar when invariant, else a vector."""
    if not uses(e, v):
        return e
    if e.dtype not in VECTOR_TYPES:
        raise _Fallback
    if isinstance(e, BufferLoad):
        if len(e.indices) != 1:
            raise _Fallback
        form = linear_in(e.indices[0], v)
        if form is None:
            raise _Fallback
        coefficient, rest = form
        base = simplify(rest + Const(coefficient * start))
        if coefficient == 0:
            return BufferLoad(e.buffer, (base,))
        return BufferLoad(e.buffer, (Ramp(base, coefficient, lanes),))
    if isinstance(e, BinOp) and e.op in _VECTOR_OPS:
        if e.op == "div" and not e.dtype.is_float:
            raise _Fallback
        a = _vector_expr(e.a, v, start, lanes)
        b = _vector_expr(e.b, v, start, lanes)
        return BinOp(e.op, _widen(a, lanes), _widen(b, lanes))
    if isinstance(e, Select) and not uses(e.cond, v):
        t = _vector_expr(e.true_value, v, start, lanes)
        f = _vector_expr(e.false_value, v, start, lanes)
        return Select(e.cond, _widen(t, lanes), _widen(f, lanes))
    raise _Fallback


def _widen(e: Expr, lanes: int) -> Expr:
    return e if lanes_of(e) > 1 else Broadcast(e, lanes)
