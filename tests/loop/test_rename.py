"""loop/rename.py: every name of a Func renamed slot by slot; the meaning is unchanged."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.from_te import workload_to_func
from tilegraph.loop.rename import name_slots, rename


def _two_stage():
    a = te.placeholder((5, 3), name="A")
    b = te.compute((5, 3), lambda i, j: a[i, j] * 2.0, name="B")
    k = te.reduce_axis(3, "k")
    c = te.compute((5,), lambda i: te.sum(b[i, k], axis=k), name="C")
    return tg.Workload([a], [c])


def test_slots_list_buffers_then_loops_and_blocks_with_their_variables():
    f = workload_to_func(_two_stage())
    assert name_slots(f) == ("A", "C", "B", "i", "j", "B", "v_i", "v_j", "i_1", "k", "C", "v_i", "v_k")


def test_rename_changes_every_name_and_nothing_else():
    f = workload_to_func(_two_stage())
    new = tuple(f"n{i}" if not s.startswith("v_") else f"v_n{i}" for i, s in enumerate(name_slots(f)))
    new = tuple(new[2] if s == "B" and i > 2 else new[1] if s == "C" and i > 2 else n
                for i, (s, n) in enumerate(zip(name_slots(f), new)))  # a block keeps its buffer's name
    g = rename(f, new)
    assert name_slots(g) == new
    x = np.random.default_rng(0).standard_normal((5, 3)).astype("float32")
    np.testing.assert_allclose(tg.interpret(g, x), tg.interpret(f, x))


def test_rename_refuses_a_wrong_number_of_names():
    f = workload_to_func(_two_stage())
    with pytest.raises(ValueError, match="names"):
        rename(f, ("X",))
