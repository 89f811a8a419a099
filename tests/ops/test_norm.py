import pytest

from tilegraph import ops, te


@pytest.mark.parametrize("shape,axis", [((3, 7), -1), ((2, 3, 5), (1, 2)), ((4, 1), 0), ((5,), 0)])
def test_layer_norm(check, shape, axis):
    x = te.placeholder(shape, name="x")
    axes = (axis,) if isinstance(axis, int) else axis
    norm_shape = tuple(shape[a] for a in sorted(a % len(shape) for a in axes))
    gamma, beta = te.placeholder(norm_shape, name="gamma"), te.placeholder(norm_shape, name="beta")
    out = ops.layer_norm(x, gamma, beta, axis=axis)
    assert out.shape == shape and out.op.tag == "layer_norm"
    check([x, gamma, beta], out, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 1), ((2, 4, 5, 3), -1)])
def test_batch_norm(check, shape, axis):
    x = te.placeholder(shape, name="x")
    stats = [te.placeholder((shape[axis],), name=n) for n in ("mean", "var", "gamma", "beta")]
    out = ops.batch_norm(x, *stats, axis=axis, epsilon=1e-3)
    assert out.shape == shape
    check([x, *stats], out)


def test_norm_bmn(check):
    x = te.placeholder((3, 5, 7), name="x")
    out = ops.norm_bmn(x)
    assert out.shape == (3,) and out.op.tag == "norm_bmn"
    check([x], out)


def test_norm_errors():
    x = te.placeholder((2, 3, 4), name="x")
    g = te.placeholder((4,), name="g")
    with pytest.raises(ValueError, match="argument gamma"):
        ops.layer_norm(x, te.placeholder((3,), name="g3"), g)
    with pytest.raises(ValueError, match="argument axis"):
        ops.layer_norm(x, g, g, axis=3)
    with pytest.raises(ValueError, match="argument epsilon"):
        ops.layer_norm(x, g, g, epsilon=-1.0)
    with pytest.raises(ValueError, match="argument var"):
        ops.batch_norm(x, te.placeholder((3,), name="m"), g, te.placeholder((3,), name="ga"),
                       te.placeholder((3,), name="b"))
    with pytest.raises(ValueError, match="argument x"):
        ops.norm_bmn(te.placeholder((3, 4), name="y"))
