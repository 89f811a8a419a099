"""pair_bf16_products: two register updates of a bfloat16 GEMM micro-kernel that add the products of
neighbouring elements of A become one AVX512_BF16 dot-product step (vdpbf16ps: 32 multiply-adds
per instruction, against 16 for a float32 FMA). Only for targets that have the instruction
(target.has_bf16_dot); anywhere else the IR is left as it is.

    acc[3] = acc[3] + broadcast(float32(A[i*K + k]), 16) * float32(B[ramp(k*N + j, 1, 16)])
    acc[0] = ...                                   (other registers in between)
    acc[3] = acc[3] + broadcast(float32(A[i*K + k + 1]), 16) * float32(B[ramp((k+1)*N + j, 1, 16)])
==>
    acc[3] = bf16_dot2(acc[3], A[i*K + k], A[i*K + k + 1], B[ramp(k*N + j, 1, 16)], B[ramp((k+1)*N + j, 1, 16)])
    acc[0] = ...

bf16_dot2(acc, a0, a1, b0, b1) is `acc + a0*b0 + a1*b1` per lane (the interpreter's meaning: the
products are exact in float32, the two additions rounded in that order). The instruction rounds as
its vendor implements it: Intel documents the odd product added first, subnormal inputs and
results flushed to zero; on AMD Zen 4 about 1% of random inputs differ from either order in the
last bit, subnormal products flush, and two overflowing products of opposite sign give the sign
of their exact sum, not NaN (measured against the emulation). Results therefore move within
float32 rounding of the accumulation, as FMA contraction already moves them; tests compare with
tolerances, never bit for bit.

The second update moves up to the first: legal because the statements in between only write other
registers (anything else ends the pairing), and nothing in the sequence writes A or B.

A serial reduction loop whose body is only such updates, each reading A at the loop variable with
coefficient 1 (one k per iteration), is first unrolled by two so its iterations pair up:

    for k in range(37):  <updates at k>   ==>   for k_pair in range(18): <updates at 2*k_pair, 2*k_pair + 1>
                                                <updates at 36>
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph import dtype as dt
from tilegraph.loop.edit import rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import BufferStore, For, Func, Seq, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.lower.passes.common import all_loop_names
from tilegraph.te.arith import affine, linear_in
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Call, Cast, Const, Expr, Ramp, Var
from tilegraph.te.visit import walk

DOT2 = "bf16_dot2"
LANES = 16  # vdpbf16ps on a zmm register: 16 float32 accumulators


def run(func: Func, target: object) -> Func:
    from tilegraph.target import has_bf16_dot

    if not has_bf16_dot(target) or not any(b.dtype == dt.bfloat16 for b in func.buffers):
        return func

    taken = all_loop_names(func.body)

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Seq):
            return _pair(s)
        if isinstance(s, For):
            return _unrolled_in_pairs(s, taken)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


def _update(s: Stmt) -> tuple[BufferStore, BufferLoad, BufferLoad] | None:
    """(store, A load, B load) when `s` is `r[c] = r[c] + broadcast(float32(A[a])) * float32(B[ramp(b, 1, 16)])`
    with A and B bfloat16 (either operand order of + and *)."""
    if not (isinstance(s, BufferStore) and s.buffer.dtype == dt.float32.with_lanes(LANES)
            and isinstance(s.value, BinOp) and s.value.op == "add"):
        return None
    for acc, product in ((s.value.a, s.value.b), (s.value.b, s.value.a)):
        if acc == BufferLoad(s.buffer, s.indices) and isinstance(product, BinOp) and product.op == "mul":
            for x, y in ((product.a, product.b), (product.b, product.a)):
                a, b = _broadcast_bf16(x), _vector_bf16(y)
                if a is not None and b is not None:
                    return s, a, b
    return None


def _broadcast_bf16(e: Expr) -> BufferLoad | None:
    if (isinstance(e, Broadcast) and e.lanes == LANES and isinstance(e.value, Cast) and e.value.dtype == dt.float32
            and isinstance(e.value.value, BufferLoad) and e.value.value.buffer.dtype == dt.bfloat16
            and not isinstance(e.value.value.indices[0], Ramp)):
        return e.value.value
    return None


def _vector_bf16(e: Expr) -> BufferLoad | None:
    if isinstance(e, Cast) and isinstance(e.value, BufferLoad) and e.value.buffer.dtype == dt.bfloat16:
        (idx,) = e.value.indices
        if isinstance(idx, Ramp) and idx.stride == 1 and idx.lanes == LANES:
            return e.value
    return None


def _unrolled_in_pairs(loop: For, taken: set[str]) -> Stmt | None:
    """A serial loop of register updates reading A at `loop.var` (coefficient 1), unrolled by two
    and paired; None when the loop is anything else."""
    body = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
    if loop.kind != "serial" or loop.extent < 2:
        return None
    updates = [u for u in map(_update, body) if u is not None]
    if not updates:
        return None
    for _, a, _ in updates:
        form = linear_in(a.indices[0], loop.var)
        if form is None or form[0] != 1:
            return None
    name = fresh_name(f"{loop.var.name}_pair", taken)
    taken.add(name)
    pair_var = Var(name, loop.var.dtype)
    two = Const(2, loop.var.dtype)
    even = substitute_stmt(loop.body, {loop.var: pair_var * two})
    odd = substitute_stmt(loop.body, {loop.var: pair_var * two + Const(1, loop.var.dtype)})
    paired = _pair(Seq((even, odd)) if not isinstance(loop.body, Seq) else Seq((*even.stmts, *odd.stmts)))  # type: ignore[attr-defined]
    if paired is None:
        return None
    pairs = For(pair_var, loop.extent // 2, "serial", paired)
    if loop.extent % 2 == 0:
        return pairs
    return seq(pairs, substitute_stmt(loop.body, {loop.var: Const(loop.extent - 1, loop.var.dtype)}))


def _buffers_touched(s: Stmt) -> set[str]:
    out = set()
    for x in walk_stmts(s):
        if isinstance(x, BufferStore):
            out.add(x.buffer.name)
        out.update(e.buffer.name for v in stmt_exprs(x) for e in walk(v) if isinstance(e, BufferLoad))
    return out


def _next_to(first: Expr, second: Expr) -> bool:
    """second == first + 1, as affine forms of the same atoms."""
    (t0, c0), (t1, c1) = affine(first), affine(second)
    return t0 == t1 and c1 == c0 + 1


def _pair(seq: Seq) -> Stmt | None:
    if sum(_update(s) is not None for s in seq.stmts) < 2:
        return None
    written = {x.buffer.name for x in walk_stmts(seq) if isinstance(x, BufferStore)}
    stmts: list[Stmt | None] = list(seq.stmts)
    pending: dict[tuple[str, Expr], int] = {}  # register -> position of its unpaired update
    changed = False
    for pos, s in enumerate(seq.stmts):
        found = _update(s)
        if found is None or found[1].buffer.name in written or found[2].buffer.name in written:
            # a moved update may pass this statement only if it touches none of the pending registers
            touched = _buffers_touched(s)
            if found is not None or any(name in touched for name, _ in pending):
                pending.clear()
            continue
        store, a1, b1 = found
        key = (store.buffer.name, store.indices[0])
        first = pending.pop(key, None)
        if first is None:
            pending[key] = pos
            continue
        _, a0, b0 = _update(seq.stmts[first])  # type: ignore[misc]
        if a0.buffer != a1.buffer or not _next_to(a0.indices[0], a1.indices[0]):
            pending[key] = pos
            continue
        acc = BufferLoad(store.buffer, store.indices)
        stmts[first] = BufferStore(store.buffer, store.indices,
                                   Call(DOT2, (acc, a0, a1, b0, b1), store.buffer.dtype))
        stmts[pos] = None
        changed = True
    if not changed:
        return None
    return Seq(tuple(s for s in stmts if s is not None))


__all__ = ["DOT2", "run"]
