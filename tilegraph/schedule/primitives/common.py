"""Helpers shared by the schedule primitives: finding loops and blocks, legality checks."""

from __future__ import annotations

from dataclasses import replace

from tilegraph.errors import ScheduleError
from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Block, For, Func, Stmt
from tilegraph.loop.visit import find_block, find_loop
from tilegraph.te.expr import Expr, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute


def get_loop(func: Func, name: str) -> For:
    try:
        return find_loop(func, str(name))
    except KeyError:
        raise ScheduleError(f"no loop named {name!r} in {func.name} (it may have been split, fused or inlined)") from None


def get_block(func: Func, name: str) -> Block:
    try:
        return find_block(func, str(name))
    except KeyError:
        raise ScheduleError(f"no block named {name!r} in {func.name}") from None


def require(cond: bool, message: str) -> None:
    if not cond:
        raise ScheduleError(message)


def simplify_stmt(s: Stmt) -> Stmt:
    def fn(x: Stmt) -> Stmt | None:
        if isinstance(x, Block):
            return replace(x, bindings=tuple(simplify(b) for b in x.bindings), predicate=simplify(x.predicate))
        return None

    return rewrite_stmt(s, fn)


def with_substituted(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    return simplify(substitute(e, mapping))
