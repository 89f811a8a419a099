import pytest

from tilegraph import ops, te


def test_conv2d_bn_relu(check):
    x, w = te.placeholder((1, 7, 5, 3), name="x"), te.placeholder((3, 3, 3, 4), name="w")
    vecs = [te.placeholder((4,), name=n) for n in ("bias", "bn_scale", "bn_offset")]
    out = ops.conv2d_bn_relu(x, w, *vecs, stride=2, padding=1)
    assert out.shape == (1, 4, 3, 4) and out.op.tag == "conv2d_bn_relu"
    conv = out.inputs[0]
    assert conv.op.tag == "conv2d_nhwc" and dict(conv.op.attrs)["stage_of"] == "conv2d_bn_relu"
    check([x, w, *vecs], out)


def test_transpose_batch_matmul(check):
    q, v = te.placeholder((2, 5, 3, 4), name="query"), te.placeholder((2, 5, 3, 4), name="value")
    out = ops.transpose_batch_matmul(q, v)
    assert out.shape == (2, 3, 5, 5)
    check([q, v], out)


def test_subgraph_errors():
    x, w = te.placeholder((1, 7, 5, 3), name="x"), te.placeholder((3, 3, 3, 4), name="w")
    with pytest.raises(ValueError, match="argument bn_scale"):
        ops.conv2d_bn_relu(x, w, te.placeholder((4,), name="b"), te.placeholder((3,), name="s"),
                           te.placeholder((4,), name="o"))
    with pytest.raises(ValueError, match="same shape"):
        ops.transpose_batch_matmul(te.placeholder((1, 2, 3, 4), name="q"), te.placeholder((1, 2, 3, 5), name="v"))
