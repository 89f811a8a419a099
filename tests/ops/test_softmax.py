import pytest

from tilegraph import ops, te


@pytest.mark.parametrize("shape,axis", [((3, 7), -1), ((2, 5, 3), 1), ((4, 3), 0), ((1, 1), -1), ((6,), 0)])
def test_softmax(check, shape, axis):
    x = te.placeholder(shape, name="x")
    out = ops.softmax(x, axis)
    assert out.shape == shape and out.op.tag == "softmax"
    stages = {t.name for t in out.inputs}
    assert stages == {"softmax_exp", "softmax_expsum"}, "the output reads exp once computed, not exp again"
    assert {t.name for t in out.inputs[0].inputs} == {"x", "softmax_max"}
    check([x], out)


def test_softmax_bad_axis():
    with pytest.raises(ValueError, match="argument axis"):
        ops.softmax(te.placeholder((3, 4), name="x"), axis=2)
