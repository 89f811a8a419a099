"""te/tensor.py: placeholders, compute, reduce axes, and the shapes and bodies they refuse."""

import pytest

from tilegraph import dtype as dt
from tilegraph import te


def test_compute_takes_axis_names_from_the_lambda_and_records_inputs():
    a = te.placeholder((4, 3), name="A")
    b = te.compute((3, 4), lambda col, row: a[row, col] * 2.0, name="B", tag="transpose")
    assert [ax.var.name for ax in b.op.axes] == ["col", "row"]
    assert b.inputs == (a,) and b.dtype == dt.float32 and b.op.tag == "transpose" and not b.is_placeholder


def test_reductions():
    a = te.placeholder((4, 3), name="A")
    k = te.reduce_axis(3, "k")
    s = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")
    assert s.op.reduce_axes[0].var.name == "k" and s.op.reduce_axes[0].extent == 3
    with pytest.raises(ValueError, match="reduce_axis"):
        te.sum(a[0, 0], axis=[])
    with pytest.raises(ValueError, match="nested"):
        te.compute((4,), lambda i: te.sum(a[i, k], axis=k) * 2.0, name="N")


@pytest.mark.parametrize("shape, error", [((0, 3), ValueError), ((2.5,), TypeError), ("44", TypeError),
                                          ((2**40, 2**40), ValueError)])
def test_bad_shapes_are_refused(shape, error):
    with pytest.raises(error):
        te.placeholder(shape, name="X")


def test_indexing_checks_rank_and_index_type():
    a = te.placeholder((4, 3), name="A")
    with pytest.raises(IndexError, match="2 dimensions"):
        a[0]
    f = te.placeholder((2,), name="F")
    with pytest.raises(TypeError, match="integer"):
        a[f[0], 0]
