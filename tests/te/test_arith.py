"""te/arith.py: the one implementation of affine forms and interval bounds."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegraph import dtype as dt
from tilegraph.te.arith import affine, affine_bounds, canonical_index, linear_in, rebuild, value_bounds
from tilegraph.te.expr import Cast, Const, Var
from tilegraph.te.printer import expr_str

i, j, k = Var("i"), Var("j"), Var("k")


def test_affine_collects_sums_and_constant_multiples_in_order_of_first_use():
    assert affine(i * 64 + (j + 1) * 16 - 3) == ({i: 64, j: 16}, 13)
    assert affine((i - i) * j + 5) == ({}, 5), "a factor that collects to 0 is a constant factor"
    terms, const = affine(i // 4 + i // 4 * 3)
    assert terms == {i // 4: 4} and const == 0


def test_products_of_two_variables_are_atoms_and_casts_only_on_request():
    assert affine(i * j + i) == ({i * j: 1, i: 1}, 0)
    widened = Cast(dt.int64, i + 2)
    assert affine(widened, through_casts=True) == ({i: 1}, 2)
    assert affine(widened) == ({widened: 1}, 0)


def test_rebuild_and_linear_in():
    assert expr_str(rebuild({i: 64, j: -1}, -3, i.dtype)) == "(((i * 64) - j) - 3)"
    assert linear_in(i * 4 + j, i)[0] == 4 and affine(linear_in(i * 4 + j, i)[1]) == ({j: 1}, 0)
    assert linear_in((i * 4 + j) // 2, i) is None
    assert linear_in(j + 1, i) == (0, j + 1)


def test_canonical_index_cancels_terms():
    assert canonical_index((j * 32 + 5) - j * 32) == Const(5)
    assert canonical_index((i * 4 + 1) * 7 + j) == (i * 28 + j) + 7
    assert canonical_index(i - i * 2) == Const(0) - i


def test_bounds():
    known = {"i": (0, 7), "j": (0, 3)}
    assert value_bounds(i * 4 + j, known) == (0, 31)
    assert value_bounds((i * 4 + j) // 8, known) == (0, 3)
    assert value_bounds(i + k, known) is None
    terms, const = affine(i - i // 2 * 2)
    assert affine_bounds({i: 1}, -1, known) == (-1, 6) and const == 0 and terms


@settings(max_examples=200, deadline=None)
@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-9, 9), st.integers(0, 7), st.integers(0, 3))
def test_affine_form_evaluates_like_the_expression(c1, c2, c0, vi, vj):
    e = (i * c1 - (j + c0) * c2) * 3 - i + c0
    terms, const = affine(e)
    env = {i: vi, j: vj}
    want = (vi * c1 - (vj + c0) * c2) * 3 - vi + c0
    assert sum(c * env[a] for a, c in terms.items()) + const == want
    lo, hi = value_bounds(e, {"i": (0, 7), "j": (0, 3)})
    assert lo <= want <= hi


@pytest.mark.parametrize("bad", [Const(1.5), Const(True)])
def test_non_integer_constants_are_atoms(bad):
    assert affine(bad)[0] == {bad: 1}
