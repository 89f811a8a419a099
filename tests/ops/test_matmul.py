import numpy as np
import pytest

from tilegraph import ops, te
from tilegraph.testing.reference import REFERENCES


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_layouts(check, transpose_a, transpose_b):
    m, k, n = 13, 7, 5
    a = te.placeholder((k, m) if transpose_a else (m, k), name="a")
    b = te.placeholder((n, k) if transpose_b else (k, n), name="b")
    out = ops.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    assert out.shape == (m, n) and out.op.tag == "matmul"
    check([a, b], out)


def test_matmul_with_bias_and_dense(check):
    a, b, bias = te.placeholder((13, 7), name="a"), te.placeholder((7, 5), name="b"), te.placeholder((5,), name="bias")
    check([a, b, bias], ops.matmul(a, b, bias))
    x, w = te.placeholder((1, 7), name="x"), te.placeholder((3, 7), name="w")
    out = ops.dense(x, w, bias=None)
    assert out.shape == (1, 3) and out.op.tag == "dense"
    check([x, w], out)


def test_batch_matmul(check):
    a, b = te.placeholder((3, 5, 7), name="a"), te.placeholder((3, 7, 2), name="b")
    out = ops.batch_matmul(a, b)
    assert out.shape == (3, 5, 2) and out.op.tag == "batch_matmul"
    check([a, b], out)


def test_shape_errors_name_the_argument():
    a, b = te.placeholder((4, 3), name="a"), te.placeholder((4, 5), name="b")
    with pytest.raises(ValueError, match="reduction extent"):
        ops.matmul(a, b)
    with pytest.raises(ValueError, match="argument bias"):
        ops.matmul(a, te.placeholder((3, 5), name="c"), te.placeholder((4,), name="bias"))
    with pytest.raises(ValueError, match="argument a"):
        ops.matmul(te.placeholder((2, 3, 4), name="x"), b)
    with pytest.raises(ValueError, match="batch"):
        ops.batch_matmul(te.placeholder((2, 3, 4), name="x"), te.placeholder((3, 4, 5), name="y"))
    with pytest.raises(ValueError, match="disagree on K"):
        ops.batch_matmul(te.placeholder((2, 3, 4), name="x"), te.placeholder((2, 5, 5), name="y"))


def test_matmul_reference_transposes():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(REFERENCES["matmul"](a, b, transpose_a=True, transpose_b=True), a.T @ b.T)
