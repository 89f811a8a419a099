"""simplify: algebraic rules, floordiv/floormod folding within variable ranges, and the invariant
that simplification never changes an expression's value."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegraph.te.expr import BinOp, Const, Expr, Var
from tilegraph.te.printer import expr_str
from tilegraph.te.simplify import simplify, simplify_bounded, value_bounds
from tilegraph.te.visit import free_vars

J0, J1, J2, J3 = (Var(f"j_{n}") for n in range(4))
VARS = (J0, J1, J2, J3)


def evaluate(e: Expr, env: dict[str, int]) -> int:
    """Python (floor) semantics of an integer expression."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    assert isinstance(e, BinOp), e
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: max(a, b),
        "min": lambda: min(a, b), "floordiv": lambda: a // b, "floormod": lambda: a % b,
    }[e.op]()


def ops_in(e: Expr) -> list[str]:
    if isinstance(e, BinOp):
        return [e.op, *ops_in(e.a), *ops_in(e.b)]
    return []


# ----------------------------------------------------------------------------------------- examples


def test_packed_panel_index_folds_within_loop_ranges() -> None:
    index = J0 * 64 + J1 * 16 + J2
    ranges = {J1: 4, J2: 16}
    assert simplify(index // 64, ranges) == J0
    assert simplify(index % 64, ranges) == J1 * 16 + J2


def test_fold_needs_the_ranges() -> None:
    index = J0 * 64 + J1 * 16 + J2
    assert "floordiv" in ops_in(simplify(index // 64))
    assert "floormod" in ops_in(simplify(index % 64, {J1: 4, J2: 17}))  # j_1*16 + j_2 may reach 64


def test_multiples_of_the_divisor_move_out_without_ranges() -> None:
    assert simplify((J0 * 64 + J1) // 64) == J0 + J1 // 64
    assert simplify((J0 * 64 + J1) % 64) == J1 % 64
    assert simplify((J0 * 64 + 16) // 64) == J0
    assert simplify((J0 * 64 + 16) % 64) == Const(16)
    assert simplify((J0 * 64 - 1) // 64) == J0 + Const(-1)
    assert simplify((J0 * 64 - 1) % 64) == Const(63)


def test_offset_range_folds_to_a_constant_quotient() -> None:
    ranges = {J1: 16}
    assert simplify((J0 * 64 + J1 + 16) // 64, ranges) == J0
    assert simplify((J1 + 64) // 64, ranges) == Const(1)
    assert simplify((J1 + 64) % 64, ranges) == J1
    assert simplify(J1 % 16, ranges) == J1
    assert simplify(J1 // 16, ranges) == Const(0)


def test_original_rules_still_apply() -> None:
    assert simplify(J0 * 1 + 0) == J0
    assert simplify((J0 * 8) // 8) == J0
    assert simplify((J0 * 8) % 8) == Const(0)
    assert simplify(J0 // 1) == J0
    assert simplify(Const(7) // Const(2)) == Const(3)
    assert simplify((J0 + 3) + 4) == J0 + Const(7)


def test_value_bounds() -> None:
    known = {"j_1": (0, 3), "j_2": (0, 15)}
    assert value_bounds(J1 * 16 + J2, known) == (0, 63)
    assert value_bounds((J1 * 16 + J2) // 16, known) == (0, 3)
    assert value_bounds(J2 % 8, known) == (0, 7)
    assert value_bounds(J0 + 1, known) is None
    assert simplify_bounded((J0 * 64 + J1 * 16 + J2) // 64, known) == J0


@pytest.mark.parametrize("extent", [0, -3, 2.5, True])
def test_bad_range_extent_is_a_value_error(extent: object) -> None:
    with pytest.raises(ValueError, match="ranges"):
        simplify(J0 // 4, {J0: extent})  # type: ignore[dict-item]


def test_bad_range_key_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="ranges"):
        simplify(J0 // 4, {"j_0": 4})  # type: ignore[dict-item]


# ----------------------------------------------------------------------------------------- property

DIVISORS = st.sampled_from([1, 2, 3, 4, 8, 16, 48, 64])


def expressions(depth: int) -> st.SearchStrategy[Expr]:
    leaf = st.one_of(st.sampled_from(VARS), st.integers(-70, 70).map(Const))
    if depth == 0:
        return leaf
    sub = expressions(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["add", "sub", "max", "min"]), sub, sub).map(lambda t: BinOp(*t)),
        st.tuples(sub, st.sampled_from([-3, -1, 0, 1, 2, 16, 64])).map(lambda t: BinOp("mul", t[0], Const(t[1]))),
        st.tuples(st.sampled_from(["floordiv", "floormod"]), sub, DIVISORS).map(
            lambda t: BinOp(t[0], t[1], Const(t[2]))),
    )


def affine_index() -> st.SearchStrategy[Expr]:
    """Sums of scaled variables and a constant: the shape of lowered tile indices."""
    term = st.tuples(st.sampled_from(VARS), st.sampled_from([1, 2, 4, 16, 32, 64, 128, -16]))
    return st.tuples(st.lists(term, min_size=1, max_size=4), st.integers(-80, 80)).map(
        lambda t: sum((v * c for v, c in t[0]), Const(t[1])))


@st.composite
def ranged_case(draw: st.DrawFn, expr: st.SearchStrategy[Expr]) -> tuple[Expr, dict[Var, int], dict[str, int]]:
    e = draw(expr)
    ranges = {v: draw(st.integers(1, 70)) for v in VARS if draw(st.booleans())}
    env = {v.name: (draw(st.integers(0, ranges[v] - 1)) if v in ranges else draw(st.integers(-300, 300)))
           for v in VARS}
    return e, ranges, env


@settings(max_examples=400, deadline=None)
@given(ranged_case(expressions(3)))
def test_simplify_preserves_value_within_ranges(case: tuple[Expr, dict[Var, int], dict[str, int]]) -> None:
    e, ranges, env = case
    assert evaluate(simplify(e, ranges), env) == evaluate(e, env)
    assert evaluate(simplify(e), env) == evaluate(e, env)


@settings(max_examples=400, deadline=None)
@given(ranged_case(st.tuples(affine_index(), DIVISORS, st.sampled_from(["floordiv", "floormod"])).map(
    lambda t: BinOp(t[2], t[0], Const(t[1])))))
def test_div_mod_of_affine_indices_preserve_value(case: tuple[Expr, dict[Var, int], dict[str, int]]) -> None:
    e, ranges, env = case
    assert evaluate(simplify(e, ranges), env) == evaluate(e, env)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=3, max_size=3), st.data())
def test_nested_tile_index_folds_completely(factors: list[int], data: st.DataObject) -> None:
    """(j0*T + j1*R + j2) // T -> j0 and % T -> j1*R + j2 whenever the inner levels fit the tile."""
    reg, inner_tiles, outer_tiles = factors
    tile = reg * inner_tiles
    index = J0 * (tile * outer_tiles) + J1 * reg + J2 if outer_tiles > 1 else J0 * tile + J1 * reg + J2
    ranges = {J1: inner_tiles, J2: reg}
    quotient = simplify(index // tile, ranges)
    remainder = simplify(index % tile, ranges)
    assert "floordiv" not in ops_in(quotient) and "floormod" not in ops_in(remainder)
    env = {"j_0": data.draw(st.integers(0, 50)), "j_1": data.draw(st.integers(0, inner_tiles - 1)),
           "j_2": data.draw(st.integers(0, reg - 1)), "j_3": 0}
    assert evaluate(quotient, env) == evaluate(index, env) // tile
    assert evaluate(remainder, env) == evaluate(index, env) % tile


def test_rewrites_introduce_no_int32_overflow():
    """Found by the scalar-semantics fuzz: x - INT_MIN was rewritten to x + INT_MIN, which
    overflows for x = INT_MIN (0 in the program); clang on PoCL then returned INT_MIN."""
    from tilegraph.te.expr import BinOp, Const, Var
    from tilegraph.te.simplify import simplify

    x = Var("x")
    int_min = Const(-(2**31))
    assert simplify(BinOp("sub", x, int_min)) == BinOp("sub", x, int_min)
    assert simplify(BinOp("add", BinOp("add", x, Const(2**31 - 1)), Const(1))) != BinOp("add", x, int_min)
    assert simplify(BinOp("sub", x, Const(5))) == BinOp("add", x, Const(-5))


def test_prove_uses_loop_ranges():
    from tilegraph import dtype as dt
    from tilegraph.te.expr import Const, Var
    from tilegraph.te.simplify import prove

    i = Var("i")
    assert prove((i * 4 + 3).lt(16), {"i": (0, 3)}) is True
    assert prove((i * 4 + 3).lt(16), {"i": (0, 4)}) is None
    assert prove(i.lt(0), {"i": (0, 4)}) is False
    assert prove(Const(True, dt.bool_), {}) is True


def test_a_divisor_of_the_divisor_folds_the_lane_variable_out() -> None:
    """(co_0*32 + co_1*8 + co_2) // 16 with co_2 < 8: an 8-lane vector never straddles a 16-channel
    group, so the quotient is free of co_2 (grouped convolutions on AVX2 loaded their input by gather)."""
    co0, co1, co2 = Var("co_0"), Var("co_1"), Var("co_2")
    index = co0 * 32 + co1 * 8 + co2
    ranges = {co1: 4, co2: 8}
    quotient, remainder = simplify(index // 16, ranges), simplify(index % 16, ranges)
    assert expr_str(quotient) == "((co_0 * 2) + (co_1 // 2))"
    assert expr_str(remainder) == "(((co_1 % 2) * 8) + co_2)"
    assert co2 not in free_vars(quotient)
    assert expr_str(simplify(index // 16, {co1: 4, co2: 9})) != expr_str(quotient), "co_2 < 9 may straddle"
