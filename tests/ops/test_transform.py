import pytest

from tilegraph import ops, te


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (0, 1, 2), (-1, 0, 1)])
def test_transpose(check, axes):
    x = te.placeholder((2, 3, 5), name="x")
    check([x], ops.transpose(x, axes))


@pytest.mark.parametrize("newshape", [(6, 5), (5, 3, 2), (-1,), (1, 30, 1), (3, -1)])
def test_reshape(check, newshape):
    x = te.placeholder((2, 3, 5), name="x")
    check([x], ops.reshape(x, newshape))


def test_transform_errors():
    x = te.placeholder((2, 3), name="x")
    with pytest.raises(ValueError, match="argument axes"):
        ops.transpose(x, (0, 0))
    with pytest.raises(ValueError, match="argument newshape"):
        ops.reshape(x, (4, 2))
    with pytest.raises(ValueError, match="argument newshape"):
        ops.reshape(x, (-1, -1))
