"""Helpers shared by the lowering passes: predicates on lowered IR and vector lane counts. Editing
statements (mapping expressions, rewriting with the enclosing loops' ranges, substituting) is
loop/edit.py; the arithmetic (affine forms, bounds, canonical indices, proving) is te/arith.py and
te/simplify.py, whose names are re-exported here for the passes."""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import Allocate, Buffer, For, Func, Seq, Stmt
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.arith import Bounds, canonical_index, linear_in, value_bounds
from tilegraph.te.expr import Broadcast, BufferLoad, Const, Expr, Ramp, Var
from tilegraph.te.simplify import prove
from tilegraph.te.visit import children, walk

NOP = Seq(())
bounds = value_bounds  # the passes' name for it


def is_true(e: Expr) -> bool:
    return isinstance(e, Const) and e.value is True


def is_false(e: Expr) -> bool:
    return isinstance(e, Const) and e.value is False


def is_nop(s: Stmt) -> bool:
    return isinstance(s, Seq) and all(is_nop(x) for x in s.stmts)


def uses(e: Expr, v: Var) -> bool:
    return any(x == v for x in walk(e))


def lanes_of(e: Expr) -> int:
    """Lane count of a lowered expression (1 for scalars). A load is a vector when its index is a
    Ramp or its buffer holds vectors (registers of a promoted local buffer)."""
    if isinstance(e, (Ramp, Broadcast)):
        return e.lanes
    if isinstance(e, BufferLoad):
        return max(e.buffer.dtype.lanes, *(lanes_of(i) for i in e.indices))
    kids = children(e)
    return max((lanes_of(k) for k in kids), default=1)


def all_buffers(func: Func) -> list[Buffer]:
    """Every buffer of a lowered Func: its params and allocs, and those its body allocates (a
    packed or materialised copy of an operand: a kernel of float32 params may compute on bfloat16)."""
    return [*func.buffers, *(s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate))]


def all_loop_names(s: Stmt) -> set[str]:
    return {x.var.name for x in walk_stmts(s) if isinstance(x, For)}


def renamed_loops(body: Stmt, taken: set[str], tag: str) -> Stmt:
    """A copy of `body` whose loops have fresh variable names (`<name>_<tag>`, not in `taken`, which
    grows by them): loop variables stay unique in a Func where a pass duplicates code."""
    mapping: dict[Var, Expr] = {}

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, For):
            name = fresh_name(f"{s.var.name}_{tag}", taken)
            taken.add(name)
            new_var = Var(name, s.var.dtype)
            mapping[s.var] = new_var
            return replace(s, var=new_var)
        return None

    renamed = rewrite_stmt(body, on_stmt)
    return substitute_stmt(renamed, mapping) if mapping else body


__all__ = ["NOP", "Bounds", "all_buffers", "all_loop_names", "bounds", "canonical_index", "is_false", "is_nop",
           "is_true", "lanes_of", "linear_in", "prove", "renamed_loops", "uses"]
