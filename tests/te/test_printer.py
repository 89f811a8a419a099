"""te/printer.py: the text of expressions (also what workload keys hash, with names replaced)."""

from tilegraph import te
from tilegraph.te.expr import Var
from tilegraph.te.printer import expr_str


def test_expressions_print_fully_parenthesised():
    i = Var("i")
    assert expr_str(i * 4 + 1) == "((i * 4) + 1)"
    assert expr_str(i // 2 - i % 2) == "((i // 2) - (i % 2))"


def test_names_can_be_replaced():
    a = te.placeholder((4,), name="A")
    i = Var("i")
    text = expr_str(a[i] * 2.0, tensor_name=lambda t: "T0", var_name=lambda v: "s0")
    assert "T0[s0]" in text and "A" not in text
