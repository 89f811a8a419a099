"""te/visit.py: children, rebuilding, substitution and the variables an expression uses."""

from tilegraph.te.expr import Var, select
from tilegraph.te.visit import children, free_vars, rewrite, substitute, uses_var, walk, with_children


def test_children_and_with_children_round_trip():
    i, j = Var("i"), Var("j")
    e = select(i.lt(j), i * 2, j + 1)
    kids = children(e)
    assert len(kids) == 3 and with_children(e, kids) == e
    assert with_children(e, (kids[0], j, i)) == select(i.lt(j), j, i)


def test_substitute_is_simultaneous_and_rewrite_is_bottom_up():
    i, j = Var("i"), Var("j")
    assert substitute(i + j, {i: j, j: i}) == j + i
    seen = []
    rewrite(i * 2 + j, lambda x: seen.append(x) or None)
    assert seen[-1] == i * 2 + j and seen.index(i) < seen.index(i * 2)


def test_free_vars_walk_and_uses():
    i, j, k = Var("i"), Var("j"), Var("k")
    e = (i + j) // 4
    assert free_vars(e) == {i, j} and uses_var(e, i) and not uses_var(e, k)
    assert list(walk(e))[0] == e and sum(1 for x in walk(e) if x == i) == 1


def test_a_subclass_of_a_node_class_is_traversed_as_its_base_and_a_non_node_is_refused():
    import dataclasses

    import pytest

    from tilegraph.te.expr import BinOp

    @dataclasses.dataclass(frozen=True)
    class TaggedAdd(BinOp):  # the traversals look node classes up by exact type: this one is not in the table
        pass

    i, j = Var("i"), Var("j")
    e = TaggedAdd("+", i, j)
    assert children(e) == (i, j)
    assert with_children(e, (j, i)) == BinOp("+", j, i)
    assert substitute(e, {i: j}) == BinOp("+", j, j)
    with pytest.raises(TypeError, match="not an expression node: int"):
        children(3)
