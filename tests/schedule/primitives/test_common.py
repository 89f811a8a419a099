"""schedule/primitives/common.py: lookups with clear errors, and substitution with simplification."""

import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import matmul
from tilegraph.loop.edit import substitute_stmt
from tilegraph.loop.printer import stmt_str
from tilegraph.loop.visit import find_block
from tilegraph.schedule.primitives.common import get_block, get_loop, require, with_substituted
from tilegraph.te.expr import Const, Var


def test_lookups_name_what_is_missing():
    f = tg.Schedule(matmul(4, 5, 3)).func
    assert get_loop(f, "k").extent == 3 and get_block(f, "C").name == "C"
    with pytest.raises(tg.ScheduleError, match="no loop named 'z'.*split, fused or inlined"):
        get_loop(f, "z")
    with pytest.raises(tg.ScheduleError, match="no block named 'Z'"):
        get_block(f, "Z")
    with pytest.raises(tg.ScheduleError, match="because"):
        require(False, "because")


def test_substitution_simplifies_what_changed():
    i = Var("i")
    assert with_substituted(i * 4 + 1, {i: Const(2)}) == Const(9)
    f = tg.Schedule(matmul(4, 5, 3)).func
    block = substitute_stmt(find_block(f, "C"), {Var("i"): Var("i_0") * 2 + 1})
    assert "((i_0 * 2) + 1)" in stmt_str(block)
