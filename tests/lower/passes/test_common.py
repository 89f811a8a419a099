"""canonical_index: integer index arithmetic regrouped as c1*x1 + ... + c0 without changing its value."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tilegraph import te
from tilegraph.lower.passes.common import canonical_index
from tilegraph.te.expr import BinOp, Const, Expr, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, walk

A, B, C, D = (Var(n) for n in "abcd")
VARS = (A, B, C, D)


def value_at(e: Expr, point: dict[Var, int]) -> int:
    folded = simplify(substitute(e, {v: Const(x) for v, x in point.items()}))
    assert isinstance(folded, Const), f"{e} did not fold to a constant"
    return int(folded.value)


def test_product_of_two_non_linear_factors_terminates_and_keeps_value():
    # avg_pool2d's window count: each factor is a difference of min/max, neither is constant
    e = (te.min_(A, 9) - te.max_(B, 0)) * (te.min_(C, 9) - te.max_(D, 0))
    out = canonical_index(e)
    assert isinstance(out, BinOp) and out.op == "mul"
    for point in itertools.product((-3, 0, 4, 12), repeat=4):
        values = dict(zip(VARS, point))
        assert value_at(out, values) == value_at(e, values)


def test_product_inside_a_sum_is_one_atom_with_coefficient():
    window = (te.min_(A, 9) - te.max_(B, 0)) * (C + 1)
    e = window + window * 2 - B * 3 + B * 3 + 4
    out = canonical_index(e)
    assert out == BinOp("add", BinOp("mul", canonical_index(window), Const(3)), Const(4))


def test_factor_that_cancels_to_a_constant_scales_the_other():
    e = ((A * 32 + 5) - A * 32) * (C * 2 + D)
    assert canonical_index(e) == BinOp("add", BinOp("mul", C, Const(10)), BinOp("mul", D, Const(5)))


def test_offsets_cancel():
    assert canonical_index((A * 32 + 5) - A * 32) == Const(5)
    assert canonical_index((A + 1) - (A + 1)) == Const(0)


def test_non_integer_expressions_are_rebuilt_around_canonical_children():
    # a float expression: only its integer children are regrouped
    e = te.cast("float32", (A + 2) - 2) * 1.5
    out = canonical_index(e)
    assert out == te.cast("float32", A) * 1.5


def _int_exprs() -> st.SearchStrategy[Expr]:
    leaves = st.one_of(st.sampled_from(VARS), st.integers(-5, 5).map(Const))

    def extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        ops = st.sampled_from(("add", "sub", "mul", "min", "max"))
        return st.builds(lambda op, a, b: BinOp(op, a, b), ops, children, children)

    return st.recursive(leaves, extend, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(e=_int_exprs(), point=st.tuples(*(st.integers(-7, 7) for _ in VARS)))
def test_canonical_index_preserves_value(e, point):
    out = canonical_index(e)
    values = dict(zip(VARS, point))
    assert value_at(out, values) == value_at(e, values)
    assert canonical_index(out) == out or value_at(canonical_index(out), values) == value_at(e, values)
    assert all(isinstance(n, (BinOp, Var, Const)) for n in walk(out))
