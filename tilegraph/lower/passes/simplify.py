"""simplify: fold every expression, drop loops of extent 1 and decided conditions.

    for j in range(1):                 ==>    C[i] = (A[i] + 0.0f)      (j replaced by 0)
      C[i + j * 4] = A[i + j]
    if (i < 16): S   (i in [0, 8))     ==>    S
    if (i < 0): S                      ==>    (nothing)

Integer index arithmetic is regrouped into c1*x1 + ... + c0 (`(j*32 + 5) - j*32` -> 5), and
floordiv/floormod of affine indices fold within the enclosing loop ranges
(`(j_0*64 + j_1*16 + j_2) // 64` -> j_0 when j_1 < 4 and j_2 < 16).
Conditions are decided by interval arithmetic over the enclosing loop ranges.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import map_exprs_with_ranges, substitute_stmt, transform_with_ranges
from tilegraph.loop.ir import GPU_LOOP_KINDS, Allocate, For, Func, IfThenElse, Seq, Stmt, seq
from tilegraph.lower.passes.common import NOP, Bounds, canonical_index, is_nop, prove
from tilegraph.te.expr import Const
from tilegraph.te.simplify import simplify_bounded


def run(func: Func, target: object) -> Func:
    body = _drop_unit_loops(func.body)
    body = map_exprs_with_ranges(
        body, lambda e, ranges: simplify_bounded(canonical_index(simplify_bounded(e, ranges)), ranges))
    body = transform_with_ranges(body, _decide)
    return replace(func, body=body)


def _drop_unit_loops(s: Stmt) -> Stmt:
    if isinstance(s, For):
        body = _drop_unit_loops(s.body)
        if s.extent == 1 and s.kind not in GPU_LOOP_KINDS:
            return substitute_stmt(body, {s.var: Const(0, s.var.dtype)})
        return s if body is s.body else replace(s, body=body)
    if isinstance(s, Seq):
        return seq(*(_drop_unit_loops(x) for x in s.stmts)) if s.stmts else s
    if isinstance(s, IfThenElse):
        other = None if s.else_body is None else _drop_unit_loops(s.else_body)
        return IfThenElse(s.cond, _drop_unit_loops(s.then_body), other)
    if isinstance(s, Allocate):
        return replace(s, body=_drop_unit_loops(s.body))
    return s


def _decide(s: Stmt, ranges: dict[str, Bounds]) -> Stmt | None:
    if isinstance(s, IfThenElse):
        verdict = prove(s.cond, ranges)
        if verdict is True:
            return s.then_body
        if verdict is False:
            return s.else_body if s.else_body is not None else NOP
        if is_nop(s.then_body) and (s.else_body is None or is_nop(s.else_body)):
            return NOP
    if isinstance(s, Seq):
        kept = [x for x in s.stmts if not is_nop(x)]
        if len(kept) != len(s.stmts):
            return seq(*kept) if kept else NOP
    if isinstance(s, For) and is_nop(s.body):
        return NOP
    return None
