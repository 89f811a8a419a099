import pytest

import tilegraph as tg
from tilegraph.loop.region import (
    Interval,
    RegionError,
    const_difference,
    expr_bounds,
    interval,
    linear_terms,
    region_read,
    union,
)
from tilegraph.loop.visit import find_loop
from tilegraph.te.expr import Const, Var
from tilegraph.te.simplify import simplify

jo, ji, k = Var("jo"), Var("ji"), Var("k")


def _c(e):
    return simplify(e)


def test_affine_bounds_are_exact():
    iv = interval(jo * 5 - ji * 2 + 3, {ji: 4})
    assert iv.extent == 7 and const_difference(iv.start, jo * 5 - 3) == 0
    lo, hi = expr_bounds(jo * 4 + ji, {ji: (1, 3)})
    assert const_difference(lo, jo * 4 + 1) == 0 and const_difference(hi, jo * 4 + 3) == 0


def test_floordiv_floormod_use_divisible_terms():
    div = interval((jo * 32 + ji) // 16, {ji: 32})
    assert div.extent == 2 and const_difference(div.start, jo * 2) == 0
    mod = interval((jo * 32 + ji) % 16, {ji: 32})
    assert mod == Interval(Const(0), 16)
    narrow = interval((ji + 3) % 16, {ji: 4})
    assert narrow.start == Const(3) and narrow.extent == 4


def test_floordiv_with_symbolic_remainder_is_conservative():
    iv = interval((jo * 5 + ji) // 16, {ji: 32})
    assert iv.extent == 3
    # brute force: every value lies inside the interval for several jo
    for j in range(20):
        start = j * 5 // 16
        for i in range(32):
            assert start <= (j * 5 + i) // 16 < start + 3


def test_min_max_select_and_failures():
    iv = interval(tg.te.max_(ji - 1, ji), {ji: 4})
    assert iv.start == Const(-1) and iv.extent == 5
    with pytest.raises(RegionError, match="non-constant"):
        interval(tg.te.max_(ji, jo), {ji: 4})
    with pytest.raises(RegionError, match="not affine"):
        interval(ji * ji, {ji: 4})
    with pytest.raises(RegionError):
        union([interval(jo, {}), interval(k, {})])


def test_linear_terms():
    terms, const = linear_terms(_c((jo + 2) * 3 - ji + 1))
    assert terms == {jo: 3, ji: -1} and const == 7


def test_region_read_substitutes_block_bindings():
    from tilegraph import te

    x = te.placeholder((20,), name="X")
    y = te.compute((18,), lambda i: x[i] + x[i + 2], name="Y")
    sch = tg.Schedule(tg.Workload([x], [y]))
    (i,) = sch.loops("Y")
    io, ii = sch.split(i, 4)
    loop = find_loop(sch.func, io)
    ((start, extent),) = region_read(loop.body, "X")
    assert extent == 6 and const_difference(start, Var(io) * 4) == 0
