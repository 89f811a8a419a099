import numpy as np
import pytest

from tilegraph import ops, te
from tilegraph.testing.reference import REFERENCES


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kernel,stride,padding", [(3, 2, 1), ((2, 3), 1, 0), (3, (1, 2), (2, 1))])
def test_pooling(check, op, layout, kernel, stride, padding):
    shape = (2, 7, 5, 3) if layout == "NHWC" else (2, 3, 7, 5)
    x = te.placeholder(shape, name="x")
    out = getattr(ops, op)(x, kernel, stride, padding, layout=layout)
    assert out.op.tag == op
    check([x], out)


def test_global_avg_pool(check):
    for layout, shape, out_shape in (("NHWC", (2, 5, 3, 4), (2, 1, 1, 4)), ("NCHW", (2, 4, 5, 3), (2, 4, 1, 1))):
        x = te.placeholder(shape, name="x")
        out = ops.global_avg_pool2d(x, layout=layout)
        assert out.shape == out_shape
        check([x], out)


def test_avg_pool_excludes_padding_from_the_count():
    x = np.ones((1, 3, 3, 1))
    out = REFERENCES["avg_pool2d"](x, 3, 1, 1)
    np.testing.assert_allclose(out, np.ones((1, 3, 3, 1)))  # count_include_pad=True would give 4/9 at corners


def test_pool_errors():
    x = te.placeholder((1, 5, 5, 2), name="x")
    with pytest.raises(ValueError, match="argument layout"):
        ops.max_pool2d(x, 2, layout="NCWH")
    with pytest.raises(ValueError, match="argument padding"):
        ops.avg_pool2d(x, 2, 1, 2)
    with pytest.raises(ValueError, match="argument kernel"):
        ops.max_pool2d(x, 0)
