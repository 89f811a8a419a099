"""hash_once: IR nodes hash their subtree once; equality, repr, replace and pickling are unchanged."""

import copy
import dataclasses
import pickle

import pytest

from tilegraph import dtype as dt
from tilegraph.hashing import hash_once
from tilegraph.loop.ir import For, Seq
from tilegraph.te.expr import BinOp, Const, Var

calls = []


@hash_once
@dataclasses.dataclass(frozen=True)
class Node:
    left: object
    right: object

    def __hash__(self) -> int:
        calls.append(self)
        return hash((self.left, self.right))


def test_the_hash_is_computed_once_per_instance():
    calls.clear()
    leaf = Node(1, 2)
    tree = Node(leaf, Node(3, leaf))
    first = hash(tree)
    assert len(calls) == 3  # every node once
    assert hash(tree) == first and hash(leaf) == hash(Node(1, 2)) and len(calls) == 4  # the fresh Node(1, 2)


def test_ir_nodes_hash_and_compare_as_values():
    i = Var("i")
    a, b = BinOp("add", i, Const(1)), BinOp("add", Var("i"), Const(1))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    hash(a)
    assert repr(a) == repr(b) and "hash" not in repr(a)  # the kept value is no field
    assert dataclasses.replace(a, b=Const(2)) != a
    store_free = For(i, 4, "serial", Seq(()))
    assert hash(store_free) == hash(For(Var("i"), 4, "serial", Seq(()))) and store_free != For(i, 5, "serial", Seq(()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.op = "sub"


def test_a_kept_hash_never_travels():
    # string hashes differ between processes: a hash carried in a pickle to a spawned builder
    # worker would break every dict lookup there, silently
    e = BinOp("mul", Var("n", dt.int64), Const(3, dt.int64))
    hash(e)
    e.__dict__["_hash_once"] = 12345  # as if computed under another process's hash seed
    for clone in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
        assert clone == e and "_hash_once" not in clone.__dict__
        assert hash(clone) == hash(BinOp("mul", Var("n", dt.int64), Const(3, dt.int64)))


def test_a_class_without_its_own_hash_is_refused():
    with pytest.raises(TypeError, match="no __hash__ of its own"):
        hash_once(type("Plain", (), {}))
