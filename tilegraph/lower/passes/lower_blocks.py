"""lower_blocks: a Block becomes its body with the block variables replaced by their bindings;
its predicate becomes a condition, dropped when the enclosing loop ranges prove it true.

    for i_0 in range(3):                                  for i_0 in range(3):
      for i_1 in range(4):                                  for i_1 in range(4):
        block C(v_i=i_0*4 + i_1) if i_0*4 + i_1 < 10:  ==>    if (i_0*4 + i_1) < 10:
          C[v_i] = A[v_i] * 2.0f                                 C[i_0*4 + i_1] = A[i_0*4 + i_1] * 2.0f

An init still attached to a block (hoist_reduction_init normally removes them) runs under
`if (all reduce bindings == 0)`.
"""

from __future__ import annotations

from tilegraph.loop.edit import map_func, substitute_stmt, transform_with_ranges
from tilegraph.loop.ir import Block, Func, IfThenElse, Stmt, seq
from tilegraph.lower.passes.common import NOP, Bounds, is_false, prove
from tilegraph.te.expr import Expr, Var, all_of
from tilegraph.te.simplify import simplify


def run(func: Func, target: object) -> Func:
    return map_func(func, lambda body: transform_with_ranges(body, _lower_block))


def _lower_block(s: Stmt, ranges: dict[str, Bounds]) -> Stmt | None:
    if not isinstance(s, Block):
        return None
    mapping: dict[Var, Expr] = {iv.var: b for iv, b in zip(s.iter_vars, s.bindings)}
    body = s.body
    if s.init is not None:
        first = simplify(all_of(*(b.eq(0) for iv, b in zip(s.iter_vars, s.bindings) if iv.kind == "reduce")))
        verdict = prove(first, ranges)
        if verdict is True:
            body = seq(s.init, body)
        elif verdict is None:
            body = seq(IfThenElse(first, s.init), body)
    body = substitute_stmt(body, mapping)
    pred = simplify(s.predicate)
    verdict = prove(pred, ranges)
    if verdict is True:
        return body
    if verdict is False or is_false(pred):
        return NOP
    return IfThenElse(pred, body)
