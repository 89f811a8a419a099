import numpy as np
import pytest

from tilegraph import ops, te
from tilegraph.testing.reference import REFERENCES


def test_conv2d_nhwc_odd_shape(check):
    x, w = te.placeholder((1, 7, 5, 3), name="x"), te.placeholder((3, 3, 3, 4), name="w")
    out = ops.conv2d_nhwc(x, w, stride=2, padding=1)
    assert out.shape == (1, 4, 3, 4) and out.op.tag == "conv2d_nhwc"
    assert out.inputs[0].op.tag == "pad" and out.inputs[1] is w  # the padded input is its own stage
    check([x, w], out)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), ((2, 1), (1, 2), 1, 1), (1, 2, 2, 1),
                                                             (2, 1, 1, 2), (1, 1, (2, 1), 3)])
def test_conv2d_nhwc_variants(check, stride, padding, dilation, groups):
    x, w = te.placeholder((2, 9, 7, 6), name="x"), te.placeholder((3, 2, 6 // groups, 3 * groups), name="w")
    check([x, w], ops.conv2d_nhwc(x, w, stride, padding, dilation, groups))


def test_conv1d_and_conv3d(check):
    x, w = te.placeholder((2, 11, 3), name="x"), te.placeholder((3, 3, 5), name="w")
    out = ops.conv1d_nlc(x, w, stride=2, padding=1, dilation=2)
    assert out.shape == (2, 5, 5)
    check([x, w], out)
    x3, w3 = te.placeholder((1, 5, 4, 3, 2), name="x"), te.placeholder((3, 2, 3, 2, 3), name="w")
    out3 = ops.conv3d_ndhwc(x3, w3, stride=(1, 2, 1), padding=1)
    assert out3.shape == (1, 5, 3, 3, 3)
    check([x3, w3], out3)


def test_conv2d_nchw(check):
    x, w = te.placeholder((1, 3, 7, 5), name="x"), te.placeholder((4, 3, 3, 3), name="w")
    out = ops.conv2d_nchw(x, w, stride=2, padding=1)
    assert out.shape == (1, 4, 4, 3)
    check([x, w], out)


@pytest.mark.parametrize("mult", [1, 2])
def test_depthwise(check, mult):
    x, w = te.placeholder((1, 7, 6, 3), name="x"), te.placeholder((3, 3, 3, mult), name="w")
    out = ops.depthwise_conv2d_nhwc(x, w, stride=2, padding=1)
    assert out.shape == (1, 4, 3, 3 * mult)
    check([x, w], out)


@pytest.mark.parametrize("stride,padding,k", [(2, 1, 4), (1, 0, 3), (3, 2, 3), (2, 0, 1)])
def test_conv2d_transpose(check, stride, padding, k):
    x, w = te.placeholder((1, 3, 4, 5), name="x"), te.placeholder((k, k, 5, 2), name="w")
    out = ops.conv2d_transpose_nhwc(x, w, stride, padding)
    assert out.shape == (1, 2 * stride - 2 * padding + k, 3 * stride - 2 * padding + k, 2)
    check([x, w], out)


def test_capsule(check):
    x, w = te.placeholder((1, 5, 4, 2, 2, 3), name="x"), te.placeholder((3, 3, 2, 2, 3, 2), name="w")
    out = ops.conv2d_capsule_nhwijc(x, w, stride=2, padding=1, capsule_size=2)
    assert out.shape == (1, 3, 2, 2, 2, 2)
    check([x, w], out)


def test_conv_errors_name_the_argument():
    x = te.placeholder((1, 8, 8, 6), name="x")
    with pytest.raises(ValueError, match="groups=4"):
        ops.conv2d_nhwc(x, te.placeholder((3, 3, 2, 8), name="w"), groups=4)
    with pytest.raises(ValueError, match="input channels"):
        ops.conv2d_nhwc(x, te.placeholder((3, 3, 5, 8), name="w"))
    with pytest.raises(ValueError, match="argument stride"):
        ops.conv2d_nhwc(x, te.placeholder((3, 3, 6, 8), name="w"), stride=0)
    with pytest.raises(ValueError, match="argument padding"):
        ops.conv2d_nhwc(x, te.placeholder((3, 3, 6, 8), name="w"), padding=(1, 2, 3))
    with pytest.raises(ValueError, match="does not fit"):
        ops.conv2d_nhwc(x, te.placeholder((9, 9, 6, 8), name="w"))
    with pytest.raises(ValueError, match="argument x"):
        ops.conv2d_nhwc(te.placeholder((8, 8, 6), name="x3"), te.placeholder((3, 3, 6, 8), name="w"))
    with pytest.raises(ValueError, match="channels"):
        ops.depthwise_conv2d_nhwc(x, te.placeholder((3, 3, 5, 1), name="w"))
    with pytest.raises(ValueError, match="padding"):
        ops.conv2d_transpose_nhwc(x, te.placeholder((3, 3, 6, 2), name="w"), 2, 3)
    with pytest.raises(ValueError, match="capsule"):
        ops.conv2d_capsule_nhwijc(te.placeholder((1, 4, 4, 4, 4, 2), name="c"),
                                  te.placeholder((3, 3, 2, 2, 2, 2), name="w"), 1, 1, 4)


def test_conv_references_agree_with_direct_sums():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 5, 4, 2)), rng.standard_normal((3, 2, 2, 3))
    got = REFERENCES["conv2d_nhwc"](x, w, stride=2, padding=1, dilation=1)
    padded = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
    direct = np.zeros(got.shape)
    for n, h, ww, c in np.ndindex(*got.shape):
        direct[n, h, ww, c] = np.sum(padded[n, 2 * h:2 * h + 3, 2 * ww:2 * ww + 2, :] * w[:, :, :, c])
    np.testing.assert_allclose(got, direct)
    # transposed convolution is the adjoint of convolution: <conv(y), x> == <y, conv_t(x)>
    y, xt = rng.standard_normal((1, 5, 5, 3)), rng.standard_normal((1, 3, 3, 2))
    wt = rng.standard_normal((3, 3, 3, 2))
    conv = REFERENCES["conv2d_nhwc"](y, wt, stride=2, padding=1)
    transposed = REFERENCES["conv2d_transpose_nhwc"](xt, wt.transpose(0, 1, 3, 2), stride=2, padding=1)
    assert conv.shape == xt.shape
    np.testing.assert_allclose(np.sum(conv * xt), np.sum(y * transposed))


@pytest.mark.parametrize("groups", [1, 6])
def test_conv2d_nhwc_asymmetric_padding(check, groups):
    """padding (top, left) and padding_after (bottom, right) apart, as TensorFlow's SAME padding of a
    stride-2 window writes it: the reference pads with numpy, the op in its own padding stage."""
    x = te.placeholder((1, 9, 8, 6), name="x")
    w = te.placeholder((3, 3, 6 // groups, 4 * groups // groups if groups == 1 else 6), name="w")
    out = ops.conv2d_nhwc(x, w, stride=2, padding=(0, 1), groups=groups, padding_after=(2, 0))
    assert out.shape == (1, (9 + 0 + 2 - 3) // 2 + 1, (8 + 1 + 0 - 3) // 2 + 1, w.shape[-1])
    check([x, w], out)
