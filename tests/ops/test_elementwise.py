import numpy as np
import pytest

from tilegraph import ops, te
from tilegraph.testing.reference import REFERENCES

UNARY = ["relu", "gelu", "sigmoid", "tanh", "exp"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_reference(check, op):
    x = te.placeholder((3, 7), name="x")
    out = getattr(ops, op)(x)
    assert out.shape == (3, 7) and out.dtype == x.dtype and out.op.tag == op
    check([x], out)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", [((5, 3), (5, 3)), ((2, 1, 3), (4, 1)), ((1,), (3, 2))])
def test_binary_broadcasts_like_numpy(check, op, shapes):
    a = te.placeholder(shapes[0], name="a")
    b = te.placeholder(shapes[1], name="b")
    out = getattr(ops, op)(a, b)
    assert out.shape == np.broadcast_shapes(*shapes)
    check([a, b], out)


@pytest.mark.parametrize("op", BINARY)
def test_binary_accepts_a_scalar_on_either_side(check, op):
    x = te.placeholder((4, 3), name="x")
    check([x], getattr(ops, op)(x, 2.5))
    check([x], getattr(ops, op)(3, x, name="lhs_scalar"))


def test_binary_rejects_bad_arguments():
    a = te.placeholder((2, 3), name="a")
    with pytest.raises(ValueError, match="broadcast"):
        ops.add(a, te.placeholder((4,), name="b"))
    with pytest.raises(TypeError, match="at least one"):
        ops.add(1.0, 2.0)
    with pytest.raises(TypeError, match="argument b"):
        ops.mul(a, "2")
    with pytest.raises(TypeError, match="dtypes"):
        ops.add(a, te.placeholder((2, 3), "int32", name="i"))


def test_unary_rejects_non_tensor_and_int_inputs():
    with pytest.raises(TypeError, match="argument x"):
        ops.relu(np.zeros(3))
    with pytest.raises(TypeError, match="floating-point"):
        ops.exp(te.placeholder((3,), "int32", name="i"))


def test_gelu_reference_is_the_erf_form():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    expected = [-0.04550026, -0.15426877, 0.0, 0.34573123, 1.95449974]
    np.testing.assert_allclose(REFERENCES["gelu"](x), expected, rtol=1e-6)
