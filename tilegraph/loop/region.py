"""Region analysis: which part of a buffer a piece of loop IR touches.

An index expression is bounded over the loops that vary ("ranged" vars, each over [0, extent))
while the enclosing loops stay symbolic. The result is an `Interval(start, extent)`: `start` is an
expression in the symbolic vars and `extent` a compile-time constant, so a region can size a
buffer. Example, under `for jo: for ji in range(32)` with jo symbolic:

    jo * 32 + ji            ->  Interval(jo * 32, 32)             (affine: exact)
    (jo * 32 + ji) // 16    ->  Interval(jo * 2, 2)               (terms divisible by 16 leave the division)
    (jo * 32 + ji) % 16     ->  Interval(0, 16)
    (jo * 5 + ji) // 16     ->  Interval((jo * 5) // 16, 3)       (conservative: ceil(31 / 16) + 1)

Affine parts (sums of var * const + const) are bounded exactly; floordiv/floormod by positive
constants, min/max and select conservatively. Anything else that depends on a ranged var raises
`RegionError`. Accesses inside blocks are first expressed in loop variables by substituting the
block bindings into the load/store indices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tilegraph import dtype as dt
from tilegraph.errors import ScheduleError
from tilegraph.loop.ir import Block, BufferStore, For, IfThenElse, Stmt
from tilegraph.loop.visit import stmt_children
from tilegraph.te.arith import Terms, affine, int_const, rebuild
from tilegraph.te.expr import BinOp, BufferLoad, Const, Expr, Select, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, walk


class RegionError(ScheduleError):
    """A region cannot be bounded by a constant extent (the message names the expression)."""


@dataclass(frozen=True)
class Interval:
    """The integers [start, start + extent); `start` may be symbolic, `extent` is constant."""

    start: Expr
    extent: int

    @property
    def stop(self) -> Expr:
        return simplify(self.start + Const(self.extent))


# ------------------------------------------------------------------------------------ linear forms
def linear_terms(e: Expr) -> tuple[Terms, int]:
    """e == sum(coef * atom) + const (te/arith.py's affine form, through integer casts)."""
    return affine(e, through_casts=True)


def from_terms(terms: Terms, const: int) -> Expr:
    return simplify(rebuild(terms, const, dt.int32))


def const_difference(a: Expr, b: Expr) -> int | None:
    """a - b when it is a constant, else None."""
    ta, ca = linear_terms(simplify(a))
    tb, cb = linear_terms(simplify(b))
    return ca - cb if ta == tb else None


# ------------------------------------------------------------------------------------- intervals
def interval(e: Expr, ranges: Mapping[Var, int]) -> Interval:
    """Bounds of `e` while each var of `ranges` takes every value of [0, extent)."""
    e, ranges = _without_unit_loops(e, ranges)
    terms, const = linear_terms(simplify(e))
    fixed: Terms = {}
    start_const = const
    extent = 1
    for atom, c in terms.items():
        if not _depends_on(atom, ranges):
            fixed[atom] = c
            continue
        if isinstance(atom, Var):
            sub = Interval(Const(0), ranges[atom])
        else:
            sub = _atom_interval(atom, ranges)
        if c > 0:
            fixed_part, k = _scaled(sub.start, c)
        else:
            fixed_part, k = _scaled(simplify(sub.start + Const(sub.extent - 1)), c)
        for a, cc in fixed_part.items():
            fixed[a] = fixed.get(a, 0) + cc
        start_const += k
        extent += abs(c) * (sub.extent - 1)
    return Interval(from_terms({a: c for a, c in fixed.items() if c != 0}, start_const), extent)


def _without_unit_loops(e: Expr, ranges: Mapping[Var, int]) -> tuple[Expr, Mapping[Var, int]]:
    """A loop of extent 1 only ever contributes 0: substituting it first keeps `(f + u) % 2` exact
    (`f % 2`, one point) instead of widening it to the whole [0, 2)."""
    unit = {v: Const(0) for v, n in ranges.items() if n == 1}
    if not unit:
        return e, ranges
    return simplify(substitute(e, unit)), {v: n for v, n in ranges.items() if n != 1}


def covers_box(items: list[Access], ranged: Iterable[For] | None = None) -> bool:
    """Whether some one access of `items` touches every point of the box `access_region` reports
    for them (no gaps, no over-approximation). A consumer placed on that box then reads only
    points that were written. Conservative: False whenever coverage cannot be shown (strides
    with gaps, floordiv/floormod/min/max of a ranged loop, a loop feeding two dimensions)."""
    region = access_region(items, ranged)
    return any(_access_covers(acc, region, ranged) for acc in items)


def _access_covers(acc: Access, region: list[Interval], ranged: Iterable[For] | None) -> bool:
    loops = acc.loops if ranged is None else tuple(ranged)
    all_ranges = {lp.var: lp.extent for lp in loops}
    seen: set[Var] = set()
    for index, box in zip(acc.indices, region):
        e, ranges = _without_unit_loops(index, all_ranges)
        terms, _ = linear_terms(simplify(e))
        varying = {a: c for a, c in terms.items() if _depends_on(a, ranges)}
        if any(not isinstance(a, Var) or a in seen for a in varying):
            return False
        seen.update(varying)  # type: ignore[arg-type]
        span = 1  # the offsets covered so far are exactly [0, span)
        for atom, c in sorted(varying.items(), key=lambda t: abs(t[1])):
            if abs(c) > span:
                return False
            span += abs(c) * (ranges[atom] - 1)  # type: ignore[index]
        if span != box.extent or const_difference(interval(index, all_ranges).start, box.start) != 0:
            return False
    return True


def _scaled(e: Expr, c: int) -> tuple[Terms, int]:
    terms, const = linear_terms(e)
    return {a: v * c for a, v in terms.items()}, const * c


def _depends_on(e: Expr, ranges: Mapping[Var, int]) -> bool:
    return any(isinstance(x, Var) and x in ranges for x in walk(e))


def _atom_interval(e: Expr, ranges: Mapping[Var, int]) -> Interval:
    if isinstance(e, BinOp) and e.op in ("floordiv", "floormod") and (int_const(e.b) or 0) > 0:
        return _div_mod_interval(e.op, e.a, int_const(e.b), ranges)  # type: ignore[arg-type]
    if isinstance(e, BinOp) and e.op in ("min", "max"):
        return union([interval(e.a, ranges), interval(e.b, ranges)], str(e))
    if isinstance(e, Select):
        return union([interval(e.true_value, ranges), interval(e.false_value, ranges)], str(e))
    raise RegionError(f"cannot bound the index expression {_show(e)}: it is not affine in the loop variables")


def _div_mod_interval(op: str, a: Expr, k: int, ranges: Mapping[Var, int]) -> Interval:
    terms, const = linear_terms(simplify(a))
    quotient = {atom: c // k for atom, c in terms.items() if c % k == 0}
    rest = from_terms({atom: c for atom, c in terms.items() if c % k != 0}, const % k)
    inner = interval(rest, ranges)
    lo = int_const(inner.start)
    if op == "floormod":
        if lo is not None and lo // k == (lo + inner.extent - 1) // k:
            return Interval(Const(lo % k), inner.extent)
        return Interval(Const(0), k)
    if lo is not None:
        div = Interval(Const(lo // k), (lo + inner.extent - 1) // k - lo // k + 1)
    else:
        div = Interval(simplify(inner.start // Const(k)), -(-(inner.extent - 1) // k) + 1)
    q = interval(from_terms(quotient, const // k), ranges)
    return Interval(simplify(q.start + div.start), q.extent + div.extent - 1)


def union(intervals: Iterable[Interval], what: str = "region") -> Interval:
    """The smallest interval holding all of them; their starts must differ by constants."""
    items = list(intervals)
    base = items[0]
    lo, hi = 0, base.extent
    for it in items[1:]:
        d = const_difference(it.start, base.start)
        if d is None:
            raise RegionError(f"cannot bound {what}: the accesses start at {_show(base.start)} and {_show(it.start)}, "
                              "which differ by a non-constant amount")
        lo, hi = min(lo, d), max(hi, d + it.extent)
    return Interval(simplify(base.start + Const(lo)), hi - lo)


def expr_bounds(expr: Expr, var_ranges: Mapping[Var, tuple[int, int]]) -> tuple[Expr, Expr]:
    """(lo, hi), inclusive, of `expr` while each var of var_ranges spans [lo, hi]; other vars stay symbolic."""
    shifted = {v: Var(v.name + "'", v.dtype) for v in var_ranges}
    moved = substitute(expr, {v: shifted[v] + Const(lo) for v, (lo, _) in var_ranges.items()})
    iv = interval(moved, {shifted[v]: hi - lo + 1 for v, (lo, hi) in var_ranges.items()})
    return iv.start, simplify(iv.start + Const(iv.extent - 1))


def constant_bounds(expr: Expr, ranges: Mapping[Var, int]) -> tuple[int, int] | None:
    """(lo, hi) inclusive when `expr` is bounded by constants over `ranges`, else None."""
    try:
        iv = interval(expr, ranges)
    except RegionError:
        return None
    lo = int_const(iv.start)
    return None if lo is None else (lo, lo + iv.extent - 1)


# --------------------------------------------------------------------------------------- accesses
@dataclass(frozen=True)
class Access:
    """One load or store of a buffer, indices written in loop variables (block bindings substituted)."""

    indices: tuple[Expr, ...]
    loops: tuple[For, ...]   # loops enclosing the access, below the statement searched
    block: str | None
    is_write: bool


def accesses(stmt: Stmt, buffer_name: str, reads: bool = True, writes: bool = True) -> list[Access]:
    out: list[Access] = []
    _find_accesses(stmt, buffer_name, reads, writes, (), {}, None, out)
    return out


def _find_accesses(s: Stmt, name: str, reads: bool, writes: bool, loops: tuple[For, ...],
                   binding: dict[Var, Expr], block: str | None, out: list[Access]) -> None:
    def add(indices: tuple[Expr, ...], is_write: bool) -> None:
        idx = tuple(simplify(substitute(i, binding)) for i in indices)
        out.append(Access(idx, loops, block, is_write))

    def scan(e: Expr) -> None:
        for x in walk(e):
            if reads and isinstance(x, BufferLoad) and x.buffer.name == name:
                add(x.indices, False)

    if isinstance(s, BufferStore):
        if writes and s.buffer.name == name:
            add(s.indices, True)
        for i in s.indices:
            scan(i)
        scan(s.value)
        return
    if isinstance(s, IfThenElse):
        scan(s.cond)
    if isinstance(s, For):
        _find_accesses(s.body, name, reads, writes, (*loops, s), binding, block, out)
        return
    if isinstance(s, Block):
        inner = dict(binding)
        inner.update({iv.var: simplify(substitute(b, binding)) for iv, b in zip(s.iter_vars, s.bindings)})
        for k in stmt_children(s):
            _find_accesses(k, name, reads, writes, loops, inner, s.name, out)
        return
    for k in stmt_children(s):
        _find_accesses(k, name, reads, writes, loops, binding, block, out)


def access_region(items: list[Access], ranged: Iterable[For] | None = None, what: str = "buffer") -> list[Interval]:
    """Per dimension, the interval covering all `items`. By default every loop below the searched
    statement is ranged; pass `ranged` to range only those loops."""
    if not items:
        raise RegionError(f"no access to {what}")
    ndim = len(items[0].indices)
    per_access = []
    for acc in items:
        loops = acc.loops if ranged is None else tuple(ranged)
        ranges = {lp.var: lp.extent for lp in loops}
        per_access.append([interval(i, ranges) for i in acc.indices])
    return [union([r[d] for r in per_access], f"dimension {d} of {what}") for d in range(ndim)]


def loads_of(stmt: Stmt, buffer: str) -> list[Access]:
    """Every read of `buffer` under `stmt`."""
    return accesses(stmt, buffer, reads=True, writes=False)


def region_read(stmt: Stmt, buffer: str, fixed_vars: Iterable[Var] = ()) -> list[tuple[Expr, int]]:
    """(start, extent) per dimension of `buffer` read under `stmt`; loops of `stmt` whose vars are
    not in `fixed_vars` are ranged, everything else stays symbolic."""
    return _region(loads_of(stmt, buffer), set(fixed_vars), buffer)


def region_written(stmt: Stmt, buffer: str, fixed_vars: Iterable[Var] = ()) -> list[tuple[Expr, int]]:
    return _region(accesses(stmt, buffer, reads=False, writes=True), set(fixed_vars), buffer)


def _region(items: list[Access], fixed: set[Var], buffer: str) -> list[tuple[Expr, int]]:
    if not items:
        raise RegionError(f"no access to buffer {buffer}")
    per_access = []
    for acc in items:
        ranges = {lp.var: lp.extent for lp in acc.loops if lp.var not in fixed}
        per_access.append([interval(i, ranges) for i in acc.indices])
    dims = [union([r[d] for r in per_access], f"dimension {d} of {buffer}") for d in range(len(items[0].indices))]
    return [(iv.start, iv.extent) for iv in dims]


def _show(e: Expr) -> str:
    from tilegraph.te.printer import expr_str

    return expr_str(e)


__all__ = [
    "Access", "Interval", "RegionError", "access_region", "accesses", "const_difference", "constant_bounds",
    "expr_bounds", "from_terms", "interval", "linear_terms", "loads_of", "region_read", "region_written", "union",
]
