"""hoist_invariant_guards: guards free of a loop's variable are tested once, outside the loop; the
result interprets exactly as before."""

from __future__ import annotations

import numpy as np
import pytest

from tilegraph import dtype as dt
from tilegraph.loop.interpret import run_func
from tilegraph.loop.ir import Buffer, BufferStore, For, Func, IfThenElse, Seq
from tilegraph.lower.passes import hoist_invariant_guards
from tilegraph.te.expr import BufferLoad, Var, compare, const

A = Buffer("A", (8, 4), dt.float32)
C = Buffer("C", (8, 2), dt.float32)
II, K = Var("i", dt.int32), Var("k", dt.int32)


def _accumulate(col: int) -> BufferStore:
    old = BufferLoad(C, (II, const(col)))
    return BufferStore(C, (II, const(col)), old + BufferLoad(A, (II, K)) * const(float(col + 1)))


def _func(cond, kind: str = "serial", outer_kind: str = "serial") -> Func:
    body = Seq((IfThenElse(cond, _accumulate(0)), IfThenElse(cond, _accumulate(1))))
    return Func("f", (A, C), For(II, 8, outer_kind, For(K, 4, kind, body)))


def _same_meaning(before: Func, after: Func) -> None:
    rng = np.random.default_rng(0)
    a, c = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)
    want, got = {"A": a, "C": c.copy()}, {"A": a, "C": c.copy()}
    run_func(before, want)
    run_func(after, got)
    np.testing.assert_array_equal(got["C"], want["C"])


def test_a_guard_free_of_the_loop_variable_moves_outside_the_loop():
    before = _func(compare("lt", II, 5))
    after = hoist_invariant_guards.run(before, None)
    outer = after.body
    assert isinstance(outer, For) and isinstance(outer.body, IfThenElse)  # for i: if (i < 5): for k: ...
    inner = outer.body.then_body
    assert isinstance(inner, For) and inner.var == K and isinstance(inner.body, Seq)
    assert not any(isinstance(s, IfThenElse) for s in inner.body.stmts)
    _same_meaning(before, after)


@pytest.mark.parametrize("case", ["uses the loop variable", "reads memory", "vector loop"])
def test_guards_that_cannot_move_stay_where_they_are(case):
    cond = {"uses the loop variable": compare("lt", K, 3),
            "reads memory": compare("lt", BufferLoad(A, (II, const(0))), const(0.0)),
            "vector loop": compare("lt", II, 5)}[case]
    before = _func(cond, kind="vectorized" if case == "vector loop" else "serial")
    after = hoist_invariant_guards.run(before, None)
    inner = after.body.body
    assert isinstance(inner, For) and inner.var == K  # no guard was moved above the k loop
    if case != "reads memory":  # adjacent guards with one condition still merge inside
        assert isinstance(inner.body, IfThenElse)
    _same_meaning(before, after)
