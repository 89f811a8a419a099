"""reorder: permute loops of one perfectly nested chain.

    for i in range(4):                 reorder(k, i)          for k in range(8):
      for j in range(5):             --------------->           for j in range(5):
        for k in range(8): S                                      for i in range(4): S

The named loops keep the positions they occupied (other loops in between stay where they are);
every loop from the outermost to the innermost named one must have exactly one loop as its body,
and a vectorized loop cannot move outward over another loop.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import For, Func, Stmt
from tilegraph.schedule.primitives.common import get_loop, require


def reorder(func: Func, loops: list[str]) -> tuple[Func, tuple[str, ...]]:
    names = [str(n) for n in loops]
    require(len(set(names)) == len(names), f"reorder: a loop is named twice in {names}")
    targets = {n: get_loop(func, n) for n in names}
    outer = _outermost(targets)
    chain: list[For] = []
    node: Stmt = outer
    remaining = set(names)
    while remaining:
        require(isinstance(node, For),
                f"reorder{tuple(names)}: the loops are not one perfectly nested chain "
                "(a statement other than a loop sits between them)")
        assert isinstance(node, For)
        chain.append(node)
        remaining.discard(node.var.name)
        node = node.body
    positions = [i for i, lp in enumerate(chain) if lp.var.name in targets]
    new_order = list(chain)
    for pos, name in zip(positions, names):
        new_order[pos] = targets[name]
    inner_body = chain[-1].body
    for lp in new_order:  # a vectorized loop stays innermost (the verifier's rule), wherever it moves
        below = new_order[new_order.index(lp) + 1:]
        require(lp.kind != "vectorized" or not (below or _descendant_loops(replace(lp, body=inner_body))),
                f"reorder{tuple(names)}: vectorized loop {lp.var.name} must stay innermost")
    stmt: Stmt = inner_body
    for lp in reversed(new_order):
        stmt = replace(lp, body=stmt)
    return replace_node(func, outer, stmt), ()


def _outermost(targets: dict[str, For]) -> For:
    """The named loop that contains all the others."""
    for lp in targets.values():
        inner = {x.var.name for x in _descendant_loops(lp)}
        if all(n == lp.var.name or n in inner for n in targets):
            return lp
    raise _not_one_chain(list(targets))


def _descendant_loops(lp: For) -> list[For]:
    from tilegraph.loop.visit import walk_stmts

    return [s for s in walk_stmts(lp.body) if isinstance(s, For)]


def _not_one_chain(names: list[str]) -> Exception:
    from tilegraph.errors import ScheduleError

    return ScheduleError(f"reorder{tuple(names)}: the loops are not nested in one another (they belong to different branches)")
