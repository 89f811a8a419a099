"""Workload keys depend on the computation only: shapes, dtypes, expression structure."""

import pytest

import tilegraph as tg
from tilegraph import ops, te


def _hand_matmul(m=16, k=8, n=4, names=("X", "Y", "Z"), axes=("m", "n", "kk"), dtype="float32"):
    lhs = te.placeholder((m, k), dtype, names[0])
    rhs = te.placeholder((k, n), dtype, names[1])
    r = te.reduce_axis(k, axes[2])
    scope = {"te": te, "lhs": lhs, "rhs": rhs, "r": r}
    # axis names come from the lambda's parameters
    fn = eval(f"lambda {axes[0]}, {axes[1]}: te.sum(lhs[{axes[0]}, r] * rhs[r, {axes[1]}], axis=r)", scope)
    return tg.Workload([lhs, rhs], [te.compute((m, n), fn, name=names[2], tag="my_tag", attrs={"note": 1})])


def _ops_matmul(m=16, k=8, n=4):
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    return tg.Workload([a, b], [ops.matmul(a, b)])


def test_op_library_and_hand_written_matmul_share_their_key():
    lib, hand = _ops_matmul(), _hand_matmul()
    assert lib.key == hand.key
    assert "ref_op" not in lib.canonical_text and "tag" not in lib.canonical_text


def test_names_tags_and_attrs_stay_outside_the_key():
    assert _hand_matmul().key == _hand_matmul(names=("P", "Q", "R"), axes=("p", "q", "c")).key


@pytest.mark.parametrize("other", [
    lambda: _hand_matmul(m=17),                    # shape
    lambda: _hand_matmul(dtype="float64"),         # dtype
    lambda: _transposed_matmul(),                  # expression structure
])
def test_a_different_computation_gets_a_different_key(other):
    assert other().key != _hand_matmul().key


def _transposed_matmul():
    a, b = te.placeholder((16, 8), name="A"), te.placeholder((8, 4), name="B")
    r = te.reduce_axis(8, "k")
    return tg.Workload([a, b], [te.compute((16, 4), lambda i, j: te.sum(b[r, j] * a[i, r], axis=r), name="C")])


def test_key_of_canonical_text_is_the_workload_key():
    from tilegraph.te.workload import key_of_canonical_text

    wl = _hand_matmul()
    assert key_of_canonical_text(wl.canonical_text) == wl.key


def test_constant_inputs_enter_the_key_and_plain_drops_them():
    lib = _ops_matmul()
    weights = tg.Workload(lib.inputs, lib.outputs, constants=[1])
    assert weights.constants == (1,) and weights.key != lib.key
    assert weights.plain.key == lib.key and weights.plain.constants == ()
    assert lib.plain is lib
    assert tg.Workload(lib.inputs, lib.outputs, constants=[0]).key not in (lib.key, weights.key)


@pytest.mark.parametrize("bad", [[2], [-1], [True], ["B"]])
def test_a_constant_that_is_not_an_input_position_is_refused(bad):
    lib = _ops_matmul()
    with pytest.raises(tg.errors.WorkloadError, match="constants must be positions of inputs"):
        tg.Workload(lib.inputs, lib.outputs, constants=bad)
