"""split: one loop becomes several nested loops whose extents are the factors.

    for i in range(10):              split(i, [None, 4])        for i_0 in range(3):
      block C(v_i=i): ...           ------------------->          for i_1 in range(4):
                                                                    block C(v_i=i_0*4 + i_1) if i_0*4 + i_1 < 10: ...

At most one factor may be None (inferred as ceil(extent / product of the others)); every given
factor lies in [1, max(extent, 1024)] and the product stays within 32-bit indices (or within the
extent, when that is larger), so a split can never make an index overflow. When the
product exceeds the extent, every block under the loop gets a guard so the tail is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from tilegraph.errors import shorten
from tilegraph.loop.edit import replace_node, rewrite_stmt, substitute_stmt
from tilegraph.loop.ir import Block, For, Func, Stmt
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import loop_names
from tilegraph.schedule.primitives.common import get_loop, require
from tilegraph.te.expr import Const, Expr, Var, binary
from tilegraph.te.simplify import simplify

MAX_GUARDED_FACTOR = 1024  # a tile may exceed its loop (the guard skips the tail) up to this width
INT32_MAX = 2**31 - 1


def split(func: Func, loop: str, factors: Sequence[int | None]) -> tuple[Func, tuple[str, ...]]:
    target = get_loop(func, loop)
    facs = list(factors)
    require(len(facs) >= 2, f"split({loop}) needs at least two factors, got {facs}")
    require(sum(f is None for f in facs) <= 1, f"split({loop}): at most one factor may be None, got {facs}")
    largest = max(target.extent, MAX_GUARDED_FACTOR)
    require(all(f is None or (isinstance(f, int) and not isinstance(f, bool) and 1 <= f <= largest) for f in facs),
            f"split({loop}): factors must be integers from 1 to {largest} (the extent {target.extent}, or a guarded "
            f"tile of at most {MAX_GUARDED_FACTOR}), got {shorten(facs)}")
    require(target.kind == "serial", f"split({loop}): the loop is already {target.kind}; split before annotating")
    known = math.prod(f for f in facs if f is not None)
    if None in facs:
        facs[facs.index(None)] = -(-target.extent // known)
    product = math.prod(facs)  # type: ignore[arg-type]
    require(product >= target.extent,
            f"split({loop}): the factors {facs} cover {product} iterations, fewer than the extent {target.extent}")
    require(product <= max(target.extent, INT32_MAX),
            f"split({loop}): the factors {shorten(facs)} cover {product} iterations, beyond 32-bit indices")

    taken = set(loop_names(func))
    new_vars: list[Var] = []
    for n in range(len(facs)):
        name = fresh_name(f"{loop}_{n}", taken)
        taken.add(name)
        new_vars.append(Var(name))
    combined: Expr = Const(0)
    for v, f in zip(new_vars, facs):
        combined = binary("add", binary("mul", combined, Const(f)), v)
    combined = simplify(combined)
    body = substitute_stmt(target.body, {target.var: combined})
    if product != target.extent:
        body = _guard_blocks(body, combined.lt(target.extent))
    stmt: Stmt = body
    for v, f in reversed(list(zip(new_vars, facs))):
        stmt = For(v, int(f), "serial", stmt)  # type: ignore[arg-type]
    return replace_node(func, target, stmt), tuple(v.name for v in new_vars)


def _guard_blocks(body: Stmt, cond: Expr) -> Stmt:
    def fn(s: Stmt) -> Stmt | None:
        if isinstance(s, Block):
            pred = cond if isinstance(s.predicate, Const) and s.predicate.value is True else binary("and", s.predicate, cond)
            return replace(s, predicate=simplify(pred))
        return None

    return rewrite_stmt(body, fn)


__all__ = ["split"]
