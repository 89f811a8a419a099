"""Grouping a micro-kernel's register updates into dot-product steps: the one analysis behind
pair_bf16_products (pairs, vdpbf16ps) and group_int8_products (groups of four, vpdpbusd).

An update is `r[c] = r[c] + broadcast(widen(A[a])) * widen(B[ramp(b, 1, lanes)])`; a `DotPattern`
says which updates it takes (`match`: the store, the A load, the B load) and how `group` of them
become one call. Updates of one register whose A indices are consecutive (a, a+1, ...) group into
one statement at the first one's position:

    r[3] = r[3] + broadcast(A[a]) * B[ramp(b0)]
    r[0] = ...                                      (other registers in between)
    r[3] = r[3] + broadcast(A[a + 1]) * B[ramp(b1)]
==> r[3] = call(r[3], A[a], A[a + 1], B[ramp(b0)], B[ramp(b1)])
    r[0] = ...

B may also come from a copy packed in K groups (tune/gensor/to_trace.py packed_layout), each
lane's `group` elements stored together: its updates read strided ramps, and group when load c
starts c elements after the first (quads, `grouped_layout`); the step then loads each lane's
group at once (codegen/int8.py, codegen/bfloat16.py):

    r[0] = r[0] + broadcast(A[a]) * B_global[ramp(kg*256, 4, 16)]          (c = 0)
    ...                                                                    (c = 1, 2)
    r[0] = r[0] + broadcast(A[a + 3]) * B_global[ramp(kg*256 + 3, 4, 16)]  (c = 3)
==> r[0] = call(r[0], A[a], .., A[a + 3], B_global[ramp(kg*256, 4, 16)], .., B_global[ramp(kg*256 + 3, 4, 16)])

Moving a later update up is legal because the statements in between only write other registers
(anything else ends the grouping), and nothing in the sequence writes A or B.

Nested Seqs (one per unrolled iteration) are spliced first, and the guards of one condition that
an unrolled iteration each leaves (a tile's guarded tail of rows) are merged into the first where
moving their updates up is legal (`_merged_guards`), so the guarded registers' updates group too:

    r[0] += a[k]*b[k];  if c { r[1] += a'[k]*b[k] }  r[0] += a[k+1]*b[k+1];  if c { r[1] += ... }
==> r[0] = call(r[0], ...);  if c { r[1] = call(r[1], ...) }

A serial reduction loop whose body is only such updates, each reading A at the loop variable with
coefficient 1 (one k per iteration), is first unrolled by `group` so its iterations group up; the
leftover iterations (extent % group) stay single updates after it:

    for k in range(38):  <updates at k>   ==>   for k_g in range(9): <updates at 4*k_g + 0, .., 4*k_g + 3>
                                                <updates at 36>  <updates at 37>
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilegraph.loop.edit import rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import BufferStore, For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.lower.passes.common import all_loop_names
from tilegraph.te.arith import affine, linear_in
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Call, Cast, Const, Expr, Ramp, Var
from tilegraph.te.visit import walk

Update = tuple[BufferStore, BufferLoad, BufferLoad]  # (the store, the A load, the B load)


@dataclass(frozen=True)
class DotPattern:
    name: str                # the Call's name: call(acc, a_0..a_{group-1}, b_0..b_{group-1})
    group: int               # updates per call
    lanes: int               # accumulator lanes
    accumulator: object      # the register's dtype (a vector DType)
    a_dtypes: tuple          # what A may hold
    b_dtypes: tuple          # what B may hold
    widened: object          # the dtype A and B are widened to in the product
    b_strides: tuple = (1,)  # B's ramp strides taken: 1 (rows), or a packed copy's K grouping


def run(func: Func, pattern: DotPattern) -> Func:
    taken = all_loop_names(func.body)

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Seq):
            return _group(s, pattern)
        if isinstance(s, For):
            return _unrolled_in_groups(s, taken, pattern)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


def match_update(s: Stmt, p: DotPattern) -> Update | None:
    """(store, A load, B load) when `s` is `r[c] = r[c] + broadcast(widen(A[a])) * widen(B[ramp(b, 1, lanes)])`
    with A and B of the pattern's dtypes (either operand order of + and *)."""
    if not (isinstance(s, BufferStore) and s.buffer.dtype == p.accumulator
            and isinstance(s.value, BinOp) and s.value.op == "add"):
        return None
    for acc, product in ((s.value.a, s.value.b), (s.value.b, s.value.a)):
        if acc == BufferLoad(s.buffer, s.indices) and isinstance(product, BinOp) and product.op == "mul":
            for x, y in ((product.a, product.b), (product.b, product.a)):
                a, b = _broadcast_load(x, p), _vector_load(y, p)
                if a is not None and b is not None:
                    return s, a, b
    return None


def _broadcast_load(e: Expr, p: DotPattern) -> BufferLoad | None:
    if (isinstance(e, Broadcast) and e.lanes == p.lanes and isinstance(e.value, Cast) and e.value.dtype == p.widened
            and isinstance(e.value.value, BufferLoad) and e.value.value.buffer.dtype in p.a_dtypes
            and not isinstance(e.value.value.indices[0], Ramp)):
        return e.value.value
    return None


def _vector_load(e: Expr, p: DotPattern) -> BufferLoad | None:
    if isinstance(e, Cast) and isinstance(e.value, BufferLoad) and e.value.buffer.dtype in p.b_dtypes:
        (idx,) = e.value.indices
        if isinstance(idx, Ramp) and idx.stride in p.b_strides and idx.lanes == p.lanes:
            return e.value
    return None


def grouped_layout(b_loads: tuple[BufferLoad, ...], group: int) -> int | None:
    """The stride s of B's loads in one step when they read a layout the step can take: rows (s = 1,
    any bases), or a copy whose K groups of s elements are stored together, load c starting c % s
    elements after load c - c % s (s = group: one contiguous group per lane; s = 2 < group: two
    pairs). None otherwise."""
    strides = {x.indices[0].stride for x in b_loads}  # type: ignore[attr-defined]
    if len(strides) != 1:
        return None
    stride = strides.pop()
    if stride == 1:
        return 1
    if stride <= 0 or group % stride or any(x.buffer != b_loads[0].buffer for x in b_loads):
        return None
    forms = [affine(x.indices[0].base) for x in b_loads]  # type: ignore[attr-defined]
    for c, (terms, const) in enumerate(forms):
        first_terms, first_const = forms[c - c % stride]
        if terms != first_terms or const - first_const != c % stride:
            return None
    return stride


def _unrolled_in_groups(loop: For, taken: set[str], p: DotPattern) -> Stmt | None:
    """A serial loop of register updates reading A at `loop.var` (coefficient 1), unrolled by the
    group size and grouped; None when the loop is anything else."""
    body = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
    if loop.kind != "serial" or loop.extent < p.group:
        return None
    updates = [u for u in (match_update(s, p) for s in body) if u is not None]
    if not updates:
        return None
    for _, a, _ in updates:
        form = linear_in(a.indices[0], loop.var)
        if form is None or form[0] != 1:
            return None
    name = fresh_name(f"{loop.var.name}_g{p.group}", taken)
    taken.add(name)
    group_var = Var(name, loop.var.dtype)
    copies: list[Stmt] = []
    for lane in range(p.group):
        at = group_var * Const(p.group, loop.var.dtype) + Const(lane, loop.var.dtype) if lane else \
            group_var * Const(p.group, loop.var.dtype)
        copy = substitute_stmt(loop.body, {loop.var: at})
        copies.extend(copy.stmts if isinstance(copy, Seq) else (copy,))
    grouped = _group(Seq(tuple(copies)), p)
    if grouped is None:
        return None
    main = For(group_var, loop.extent // p.group, "serial", grouped)
    rest = [substitute_stmt(loop.body, {loop.var: Const(k, loop.var.dtype)})
            for k in range(loop.extent - loop.extent % p.group, loop.extent)]
    return seq(main, *rest) if rest else main


def _accesses(s: Stmt) -> set[tuple[str, Expr]]:
    """(buffer, index) of every store and load in `s`."""
    out = set()
    for x in walk_stmts(s):
        if isinstance(x, BufferStore):
            out.add((x.buffer.name, x.indices[0] if len(x.indices) == 1 else x.indices))
        out.update((e.buffer.name, e.indices[0] if len(e.indices) == 1 else e.indices)
                   for v in stmt_exprs(x) for e in walk(v) if isinstance(e, BufferLoad))
    return out


def _passes(s: Stmt, pending: dict) -> dict:
    """The pending runs a statement that is no update leaves: all of those whose register it does
    not touch. Registers are slots at constant indices, so another index of the same buffer is
    another register only when constant too (a guarded update of the tail's rows)."""
    touched = _accesses(s)
    keep = {}
    for key, run_ in pending.items():
        name, _ = key
        same_buffer = [index for buffer, index in touched if buffer == name]
        if key in touched or any(not isinstance(index, Const) for index in same_buffer):
            continue
        keep[key] = run_
    return keep


def _next_to(first: Expr, second: Expr) -> bool:
    """second == first + 1, as affine forms of the same atoms."""
    (t0, c0), (t1, c1) = affine(first), affine(second)
    return t0 == t1 and c1 == c0 + 1


def _flattened(stmts: tuple[Stmt, ...] | list[Stmt]) -> list[Stmt]:
    """Nested Seqs spliced into one list (an unrolled loop leaves one Seq per iteration)."""
    out: list[Stmt] = []
    for s in stmts:
        out.extend(_flattened(s.stmts) if isinstance(s, Seq) else (s,))
    return out


def _stores(s: Stmt) -> set[tuple[str, Expr]]:
    return {(x.buffer.name, x.indices[0] if len(x.indices) == 1 else x.indices)
            for x in walk_stmts(s) if isinstance(x, BufferStore)}


def _overlap(xs: set[tuple[str, Expr]], ys: set[tuple[str, Expr]]) -> bool:
    """Whether two sets of (buffer, index) accesses may meet: the same buffer at the same index, or
    at an index that is not a constant (registers are slots at constant indices)."""
    return any(a == b and (i == j or not isinstance(i, Const) or not isinstance(j, Const))
               for a, i in xs for b, j in ys)


def _merged_guards(stmts: list[Stmt]) -> list[Stmt]:
    """Guarded statements of one condition gathered into its first guard, where moving them up is
    legal: `if c {X}; Y; if c {Z}` -> `if c {X; Z}; Y` when Z and Y touch no buffer the other
    writes, and c reads no buffer. An unrolled reduction over a row tile with a guarded tail (7
    rows in tiles of 2) alternates unguarded and guarded updates, one guard per iteration; merged,
    the guarded registers' updates group too."""
    out: list[Stmt] = []
    for s in stmts:
        if isinstance(s, IfThenElse) and s.else_body is None and _pure(s.cond) and _plain(s):
            written, touched = _stores(s.then_body), _accesses(s.then_body)
            for j in range(len(out) - 1, -1, -1):
                earlier = out[j]
                if isinstance(earlier, IfThenElse) and earlier.else_body is None and earlier.cond == s.cond:
                    out[j] = IfThenElse(earlier.cond, Seq((*_flattened((earlier.then_body,)),
                                                           *_flattened((s.then_body,)))))
                    s = None  # type: ignore[assignment]
                    break
                if not _plain(earlier) or _overlap(written, _accesses(earlier)) or _overlap(_stores(earlier), touched):
                    break
            if s is None:
                continue
        out.append(s)
    return out


def _pure(e: Expr) -> bool:
    return not any(isinstance(x, BufferLoad) for x in walk(e))


def _plain(s: Stmt) -> bool:
    """Only loads, stores, loops and conditions in it (no allocation, barrier or reduction that
    a statement moved past could depend on beyond the buffers it touches)."""
    return all(isinstance(x, (BufferStore, Seq, IfThenElse, For)) for x in walk_stmts(s))


def _group(block: Seq, p: DotPattern) -> Stmt | None:
    flat = _flattened(block.stmts)
    merged = _merged_guards(flat)
    inner_changed = False
    for i, s in enumerate(merged):  # inside a merged guard, its registers' updates group too
        if isinstance(s, IfThenElse) and all(s is not f for f in flat):
            body = Seq(tuple(_flattened((s.then_body,))))
            grouped_body = _group(body, p)
            if grouped_body is not None:
                merged[i], inner_changed = IfThenElse(s.cond, grouped_body), True
    grouped = _grouped_run(Seq(tuple(merged)), p)
    if grouped is None and not inner_changed:
        return None
    return grouped if grouped is not None else Seq(tuple(merged))


def _grouped_run(block: Seq, p: DotPattern) -> Stmt | None:
    if sum(match_update(s, p) is not None for s in block.stmts) < p.group:
        return None
    written = {x.buffer.name for x in walk_stmts(block) if isinstance(x, BufferStore)}
    stmts: list[Stmt | None] = list(block.stmts)
    pending: dict[tuple[str, Expr], list[tuple[int, Update]]] = {}  # register -> its ungrouped run
    changed = False
    for pos, s in enumerate(block.stmts):
        found = match_update(s, p)
        if found is None or found[1].buffer.name in written or found[2].buffer.name in written:
            # a moved update may pass this statement only if it touches none of the pending registers
            pending = {} if found is not None else _passes(s, pending)
            continue
        store, a, _ = found
        key = (store.buffer.name, store.indices[0])
        run_ = pending.get(key, [])
        if run_ and (run_[-1][1][1].buffer != a.buffer or not _next_to(run_[-1][1][1].indices[0], a.indices[0])):
            run_ = []
        run_ = [*run_, (pos, found)]
        if len(run_) < p.group:
            pending[key] = run_
            continue
        pending.pop(key, None)
        acc = BufferLoad(store.buffer, store.indices)
        a_loads = tuple(u[1] for _, u in run_)
        b_loads = tuple(u[2] for _, u in run_)
        if grouped_layout(b_loads, p.group) is None:  # a layout no step reads: the updates stay
            continue
        stmts[run_[0][0]] = BufferStore(store.buffer, store.indices,
                                        Call(p.name, (acc, *a_loads, *b_loads), store.buffer.dtype))
        for position, _ in run_[1:]:
            stmts[position] = None
        changed = True
    if not changed:
        return None
    return Seq(tuple(s for s in stmts if s is not None))


__all__ = ["DotPattern", "grouped_layout", "run", "match_update"]

