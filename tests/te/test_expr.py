"""te/expr.py: scalar expression nodes, dtype promotion and the builders users write."""

import pytest

from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.te.expr import BinOp, Call, Cast, Cmp, Const, Select, Var, combine, identity_of


def test_python_operators_build_nodes_and_equality_is_structural():
    i = Var("i")
    e = i * 4 + 1
    assert isinstance(e, BinOp) and e.op == "add" and e == Var("i") * 4 + 1 and e != i * 4 + 2
    assert isinstance(i.lt(3), Cmp) and i.lt(3).dtype == dt.bool_


def test_constants_take_the_other_operands_dtype_and_must_fit_it():
    x = te.placeholder((2,), "int8", "x")[0]
    assert (x + 1).dtype == dt.int8
    with pytest.raises((ValueError, OverflowError)):
        x + 300
    f = te.placeholder((2,), "float32", "f")[0]
    assert (f * 2).dtype == dt.float32 and isinstance((f * 2).b, Const)


def test_integer_true_division_is_refused_and_floor_division_is_the_integer_rule():
    i = Var("i")
    with pytest.raises(TypeError, match="//"):
        i / 2
    assert (i // 2).op == "floordiv" and (i % 2).op == "floormod"


def test_float_negation_is_ieee_negation_and_integer_negation_subtracts():
    f = te.placeholder((2,), "float32", "f")[0]
    assert (-f).op == "mul" and (-f).b == Const(-1.0, dt.float32)
    assert (-Var("i")).op == "sub"


def test_select_cast_and_calls():
    f = te.placeholder((2,), "float32", "f")[0]
    s = te.select(f.gt(0.0), f, 0.0)
    assert isinstance(s, Select) and s.dtype == dt.float32
    assert isinstance(te.cast("int32", f), Cast) and te.cast("int32", f).dtype == dt.int32
    for fn in (te.exp, te.log, te.sqrt, te.tanh, te.erf, te.sigmoid, te.abs_):
        assert isinstance(fn(f), Call) and fn(f).dtype == dt.float32


def test_reduction_identities_and_combiners():
    assert identity_of("sum", dt.float32) == Const(0.0, dt.float32)
    assert identity_of("max", dt.int32).value == -(2**31)
    acc, v = Var("a", dt.float32), Var("v", dt.float32)
    assert combine("sum", acc, v) == acc + v
    assert combine("max", acc, v).op == "max"
