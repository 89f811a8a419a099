import pytest

from tilegraph import ops, te


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True), ((0, 1, 2), False)])
def test_reductions(check, op, axis, keepdims):
    x = te.placeholder((3, 4, 5), name="x")
    out = getattr(ops, op)(x, axis=axis, keepdims=keepdims)
    assert out.op.tag == op
    check([x], out)


def test_full_reduction_without_keepdims_has_shape_one():
    assert ops.sum(te.placeholder((3, 4), name="x")).shape == (1,)
    assert ops.max(te.placeholder((3, 4), name="x"), axis=(0, 1), keepdims=True).shape == (1, 1)


def test_reduce_errors():
    x = te.placeholder((3, 4), name="x")
    with pytest.raises(ValueError, match="argument axis"):
        ops.sum(x, axis=2)
    with pytest.raises(ValueError, match="repeats"):
        ops.mean(x, axis=(0, -2))
