"""loop/ir.py: immutable nodes, buffers with padding, seq flattening, Func lookups."""

import dataclasses

import pytest

from tilegraph import dtype as dt
from tilegraph.loop.ir import Buffer, BufferStore, Func, Seq, seq
from tilegraph.te.expr import Const, Var


def test_buffers_count_storage_with_padding():
    b = Buffer("B", (4, 6), dt.float32, padding=(0, 2))
    assert b.ndim == 2 and b.storage_shape == (4, 8) and b.size == 32
    assert Buffer("C", (3,), dt.int8).storage_shape == (3,)


def test_nodes_are_frozen_and_seq_flattens():
    b = Buffer("B", (4,), dt.float32)
    store = BufferStore(b, (Var("i"),), Const(1.0, dt.float32))
    with pytest.raises(dataclasses.FrozenInstanceError):
        store.value = Const(2.0, dt.float32)  # type: ignore[misc]
    nested = seq(store, seq(store, Seq(())), store)
    assert isinstance(nested, Seq) and len(nested.stmts) == 3
    assert seq(store) is store


def test_func_buffer_lookup():
    a, c = Buffer("A", (4,), dt.float32), Buffer("T", (4,), dt.float32)
    f = Func("f", (a,), Seq(()), (c,))
    assert f.buffers == (a, c) and f.buffer("T") is c
    with pytest.raises(KeyError):
        f.buffer("Z")
