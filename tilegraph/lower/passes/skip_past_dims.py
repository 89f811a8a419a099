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
least N, so no instance of it would run. A guard is the block's predicate's, the one rfactor
moves around its body, or a store into a tensor past its run-time extent (its element is
unspecified: Func attr "dim_extents"). Each guard is lifted once per path (at its outermost loop;
deeper loops moving the same index add nothing but tests in hotter code), only to serial and
parallel loops (never into unrolled or vector ones: micro-kernels stay straight), and a spatial
guard never into a reduction loop. Where the lifted guards include a reduction's, an iteration
whose whole tile is below the bound (`hi(e) < N`) runs a copy of its body without them (fresh
loop names), the partial tile the guarded body:

    for r_0 in range(64):                    for r_0 in range(64):
      for r_1 in range(16) vectorized:  ==>    if r_0*16 + 15 < n:  (r_1 loop, unguarded)
        block M(...) if r_0*16 + r_1 < n         elif r_0*16 < n:   (r_1 loop, guarded)

The guards themselves stay on the blocks (relax_dims_guards drops those a kernel need not test).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.from_te import DIM_EXTENTS_ATTR
from tilegraph.loop.ir import Allocate, Block, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.region import RegionError, expr_bounds
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.common import all_loop_names, renamed_loops
from tilegraph.te.dims import DIMS_INPUT, dims_guards
from tilegraph.te.expr import Cmp, Expr, Var, all_of, binary, conjuncts
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, uses_var

LIFT_KINDS = ("serial", "parallel")


def run(func: Func, target: object) -> Func:
    if not any(p.name == DIMS_INPUT for p in func.params):
        return func
    extents = dict(dict(func.attrs).get(DIM_EXTENTS_ATTR, ()))
    taken = all_loop_names(func.body)  # the full tiles' copies get fresh loop names
    return replace(func, body=_visit(func.body, frozenset(), False, extents, taken))


def _visit(s: Stmt, lifted: frozenset[tuple[str, Expr]], inside_reduction: bool,
           extents: dict[str, tuple[Expr | None, ...]], taken: set[str]) -> Stmt:
    if isinstance(s, For):
        if s.kind == "unrolled" or s.kind == "vectorized":
            return s  # a micro-kernel: its rows are not tested one by one (relax_dims_guards)
        reduction = _moves_a_reduction(s)
        lift = None
        if s.kind in LIFT_KINDS and (reduction or not inside_reduction):
            lift = _skip_condition(s, lifted, extents)
        body = _visit(s.body, lifted | (lift.keys if lift else frozenset()), inside_reduction or reduction, extents,
                      taken)
        if lift is not None:
            guarded = IfThenElse(lift.may_run, body)
            # a whole tile below the bounds runs without its reduction guards: straight vector code
            if lift.full is not None:
                body = IfThenElse(lift.full, renamed_loops(_without(body, lift.proven), taken, "full"), guarded)
            else:
                body = guarded
        return s if body is s.body else replace(s, body=body)
    if isinstance(s, Seq):
        stmts = tuple(_visit(x, lifted, inside_reduction, extents, taken) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)
    if isinstance(s, IfThenElse):
        then = _visit(s.then_body, lifted, inside_reduction, extents, taken)
        other = None if s.else_body is None else _visit(s.else_body, lifted, inside_reduction, extents, taken)
        return s if then is s.then_body and other is s.else_body else IfThenElse(s.cond, then, other)
    if isinstance(s, Allocate):
        body = _visit(s.body, lifted, inside_reduction, extents, taken)
        return s if body is s.body else replace(s, body=body)
    return s  # a block (or a leaf): nothing is lifted into it


def _moves_a_reduction(loop: For) -> bool:
    """Whether the loop's variable feeds a reduce binding of a block below it: a test inside such a
    loop runs once per reduction step."""
    found: list[tuple[Block, tuple[For, ...]]] = []
    _blocks_under(loop.body, (), found)
    return any(iv.kind == "reduce" and uses_var(b, loop.var)
               for block, _ in found for iv, b in zip(block.iter_vars, block.bindings))


def _body_guards(block: Block) -> list[Cmp]:
    """Dims guards around the whole body of a block (rfactor moves a reduction's guards there, so
    that lanes past the bound keep the combiner's identity), in loop variables."""
    if not isinstance(block.body, IfThenElse) or block.body.else_body is not None:
        return []
    binding = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
    return [Cmp("lt", simplify(substitute(g.a, binding)), g.b) for g in dims_guards(block.body.cond)]


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


@dataclass(frozen=True)
class _Lift:
    may_run: Expr  # some instance below this iteration may pass its guards
    keys: frozenset[tuple[str, Expr]]  # (block, index) of the guards lifted here
    full: Expr | None  # every instance below passes its reduction guards lifted here
    proven: frozenset[tuple[str, Expr]]  # (block, guard) that `full` proves


def _skip_condition(loop: For, lifted: frozenset[tuple[str, Expr]],
                    extents: dict[str, tuple[Expr | None, ...]]) -> _Lift | None:
    """What lifting the guards moved by `loop` to its iterations tests: None where some block
    below has none (it may run in any iteration)."""
    found: list[tuple[Block, tuple[For, ...]]] = []
    _blocks_under(loop.body, (), found)
    if not found:
        return None
    may_run: list[Expr] = []
    full: list[Expr] = []
    keys: set[tuple[str, Expr]] = set()
    proven: set[tuple[str, Expr]] = set()
    for block, inner in found:
        ranges = {f.var: (0, f.extent - 1) for f in inner}
        reduce_indices = {simplify(b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "reduce"}
        own = dims_guards(block.predicate)
        tests = []
        for guard in [*own, *_body_guards(block), *_store_guards(block, extents)]:
            key = (block.name, guard.a)
            if key in lifted or not uses_var(guard.a, loop.var) or any(uses_var(guard.a, v) for v in _free(block)):
                continue
            try:
                lo, hi = expr_bounds(guard.a, ranges)
            except RegionError:  # an index the interval arithmetic cannot bound: no lift for it
                continue
            tests.append(lo.lt(guard.b))
            keys.add(key)
            if guard in own and simplify(guard.a) in reduce_indices:
                full.append(hi.lt(guard.b))
                proven.add((block.name, guard))
        if not tests:
            return None  # this block may run in any iteration: nothing to skip
        may_run.append(simplify(all_of(*dict.fromkeys(tests))))  # a guard and its store's extent often agree
    return _Lift(_any(list(dict.fromkeys(may_run))), frozenset(keys),
                 simplify(all_of(*dict.fromkeys(full))) if full else None, frozenset(proven))


def _any(tests: list[Expr]) -> Expr:
    out = tests[0]
    for t in tests[1:]:
        out = binary("or", out, t)
    return out


def _without(s: Stmt, proven: frozenset[tuple[str, Expr]]) -> Stmt:
    """`s` with the proven guards taken off their blocks' predicates."""

    def strip(x: Stmt) -> Stmt | None:
        if not isinstance(x, Block):
            return None
        kept = [c for c in conjuncts(x.predicate) if (x.name, c) not in proven]
        return replace(x, predicate=all_of(*kept))

    return rewrite_stmt(s, strip)


def _free(block: Block) -> tuple[Var, ...]:
    """The block's own variables (a guard must be written in loop variables to be lifted)."""
    return tuple(iv.var for iv in block.iter_vars)


__all__ = ["run"]
