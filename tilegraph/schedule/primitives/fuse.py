"""fuse: consecutive perfectly nested loops become one loop over the product of their extents.

    for i in range(4):                fuse(i, j)          for i_j_fused in range(20):
      for j in range(5): S(i, j)    ------------->          S(i_j_fused // 5, i_j_fused % 5)

The loops must all be spatial or all reduce loops of the blocks beneath them.
"""

from __future__ import annotations

import math

from tilegraph.loop.edit import replace_node, substitute_stmt
from tilegraph.loop.ir import For, Func
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import loop_names, reduce_loop_of
from tilegraph.schedule.primitives.common import get_loop, require
from tilegraph.te.expr import Const, Expr, Var


def fuse(func: Func, loops: list[str]) -> tuple[Func, tuple[str, ...]]:
    names = [str(n) for n in loops]
    require(len(names) >= 2, f"fuse needs at least two loops, got {names}")
    chain = [get_loop(func, names[0])]
    for n in names[1:]:
        require(chain[-1].body is get_loop(func, n) or chain[-1].body == get_loop(func, n),
                f"fuse{tuple(names)}: {n} is not the only statement in the body of {chain[-1].var.name}")
        chain.append(chain[-1].body)  # type: ignore[arg-type]
    for lp in chain:
        require(lp.kind == "serial", f"fuse: loop {lp.var.name} is {lp.kind}; fuse before annotating")
    # A loop over both spatial and reduce iterations would, once split and reordered, visit a
    # point's later reduce steps before its first one (where the block's init runs): refused.
    reducing = [bool(reduce_loop_of(lp)) for lp in chain]
    require(all(reducing) or not any(reducing),
            f"fuse{tuple(names)}: mixes reduce loops ({', '.join(n for n, r in zip(names, reducing) if r)}) "
            "with spatial ones; fuse loops of one kind")
    fused = Var(fresh_name("_".join(names) + "_fused", loop_names(func)))
    mapping: dict[Var, Expr] = {}
    inner = 1
    for lp in reversed(chain):
        e: Expr = fused if inner == 1 else fused // Const(inner)
        if lp is not chain[0]:
            e = e % Const(lp.extent)
        mapping[lp.var] = e
        inner *= lp.extent
    body = substitute_stmt(chain[-1].body, mapping)
    extent = math.prod(lp.extent for lp in chain)
    return replace_node(func, chain[0], For(fused, extent, "serial", body)), (fused.name,)
