"""skip_past_dims: a kernel called with run-time dims below their upper bounds skips whole tiles
past them, not instance by instance.

A run-time dim guards each block over it (`row < n`, loop/from_te.py), but the loops keep their
static extents, the bounds' upper limits: a kernel tuned at n = 128 and called with n = 1 would
still run every tile and test every instance. This pass tests, once per iteration of the
outermost loop that moves a guarded index, whether any instance below that iteration can pass its
guard, and skips the iteration where none can:

    for i_0 in range(16):                          for i_0 in range(16):
      for k in range(768):                           if i_0 * 8 < n:
        for i_1 in range(8):              ==>          for k in range(768):
          block C(...) if i_0*8 + i_1 < n:               for i_1 in range(8):
            ...                                             block C(...) if i_0*8 + i_1 < n: ...

Meaning is unchanged: an iteration is skipped only where every block below it has a guard
`e < N` (N reads the dims input) whose least value over the loops inside, `lo(e)`, is already at
least N, so no instance of it would run. Each guard is lifted once per path (at its outermost
loop; deeper loops moving the same index add nothing but tests in hotter code), and only to
serial, parallel and unrolled loops (a vector loop's body must stay straight). The guards
themselves stay on the blocks (relax_dims_guards drops those a kernel need not test).
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph.loop.ir import Allocate, Block, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.region import expr_bounds
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.dims import DIMS_INPUT, dims_guards
from tilegraph.te.expr import Cmp, Expr, Var, binary
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, uses_var

LIFT_KINDS = ("serial", "parallel")
EXTENTS_ATTR = "dim_extents"  # Func attr: (buffer name, run-time extent or None per dimension), loop/from_te.py


def run(func: Func, target: object) -> Func:
    if not any(p.name == DIMS_INPUT for p in func.params):
        return func
    extents = dict(dict(func.attrs).get(EXTENTS_ATTR, ()))
    return replace(func, body=_visit(func.body, frozenset(), False, extents))


def _visit(s: Stmt, lifted: frozenset[tuple[str, Expr]], inside_reduction: bool,
           extents: dict[str, tuple[Expr | None, ...]]) -> Stmt:
    if isinstance(s, For):
        if s.kind == "unrolled" or s.kind == "vectorized":
            return s  # a micro-kernel: its rows are not tested one by one (relax_dims_guards)
        reduction = _moves_a_reduction(s)
        cond, keys = None, frozenset()
        if s.kind in LIFT_KINDS and (reduction or not inside_reduction):
            cond, keys = _skip_condition(s, lifted, extents)
        body = _visit(s.body, lifted | keys, inside_reduction or reduction, extents)
        if cond is not None:
            body = IfThenElse(cond, body)
        return s if body is s.body else replace(s, body=body)
    if isinstance(s, Seq):
        stmts = tuple(_visit(x, lifted, inside_reduction, extents) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)
    if isinstance(s, IfThenElse):
        then = _visit(s.then_body, lifted, inside_reduction, extents)
        other = None if s.else_body is None else _visit(s.else_body, lifted, inside_reduction, extents)
        return s if then is s.then_body and other is s.else_body else IfThenElse(s.cond, then, other)
    if isinstance(s, Allocate):
        body = _visit(s.body, lifted, inside_reduction, extents)
        return s if body is s.body else replace(s, body=body)
    return s  # a block (or a leaf): nothing is lifted into it


def _moves_a_reduction(loop: For) -> bool:
    """Whether the loop's variable feeds a reduce binding of a block below it: a test inside such a
    loop runs once per reduction step."""
    found: list[tuple[Block, tuple[For, ...]]] = []
    _blocks_under(loop.body, (), found)
    return any(iv.kind == "reduce" and uses_var(b, loop.var)
               for block, _ in found for iv, b in zip(block.iter_vars, block.bindings))


def _store_guards(block: Block, extents: dict[str, tuple[Expr | None, ...]]) -> list[Cmp]:
    """`index < extent` for each store of the block into a tensor with run-time extents, in loop
    variables: an instance whose store lands past the extent writes an unspecified element, and
    may be skipped."""
    binding = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
    out = []
    for stmt in walk_stmts(block.body):
        if isinstance(stmt, BufferStore) and stmt.buffer.name in extents:
            for index, bound in zip(stmt.indices, extents[stmt.buffer.name]):
                if bound is not None:
                    out.append(Cmp("lt", simplify(substitute(index, binding)), bound))
    return out


def _blocks_under(s: Stmt, inner: tuple[For, ...], out: list[tuple[Block, tuple[For, ...]]]) -> None:
    """Every block below `s`, with the loops between `s` and it."""
    if isinstance(s, Block):
        out.append((s, inner))
    elif isinstance(s, For):
        _blocks_under(s.body, (*inner, s), out)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _blocks_under(x, inner, out)
    elif isinstance(s, IfThenElse):
        _blocks_under(s.then_body, inner, out)
        if s.else_body is not None:
            _blocks_under(s.else_body, inner, out)
    elif isinstance(s, Allocate):
        _blocks_under(s.body, inner, out)


def _skip_condition(loop: For, lifted: frozenset[tuple[str, Expr]],
                    extents: dict[str, tuple[Expr | None, ...]]) -> tuple[Expr | None, frozenset]:
    """The condition under which an iteration of `loop` may run some instance, where every block
    below it has a guard moved by `loop` not lifted above; and the guards it lifts."""
    found: list[tuple[Block, tuple[For, ...]]] = []
    _blocks_under(loop.body, (), found)
    if not found:
        return None, frozenset()
    may_run: list[Expr] = []
    keys: set[tuple[str, Expr]] = set()
    for block, inner in found:
        ranges = {f.var: (0, f.extent - 1) for f in inner}
        tests = []
        for guard in [*dims_guards(block.predicate), *_store_guards(block, extents)]:
            key = (block.name, guard.a)
            if key in lifted or not uses_var(guard.a, loop.var) or any(uses_var(guard.a, v) for v in _free(block)):
                continue
            try:
                lo, _ = expr_bounds(guard.a, ranges)
            except Exception:  # an index the interval arithmetic cannot bound: no lift for it
                continue
            tests.append(lo.lt(guard.b))
            keys.add(key)
        if not tests:
            return None, frozenset()  # this block may run in any iteration: nothing to skip
        tests = list(dict.fromkeys(tests))  # a guard and its store's extent often say the same
        test = tests[0]
        for t in tests[1:]:
            test = binary("and", test, t)
        may_run.append(simplify(test))
    unique = list(dict.fromkeys(may_run))
    cond = unique[0]
    for t in unique[1:]:
        cond = binary("or", cond, t)
    return cond, frozenset(keys)


def _free(block: Block) -> tuple[Var, ...]:
    """The block's own variables (a guard must be written in loop variables to be lifted)."""
    return tuple(iv.var for iv in block.iter_vars)


__all__ = ["run"]
