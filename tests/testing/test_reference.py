"""The references against independent formulations (brute force, identities)."""

import numpy as np
import pytest

from tilegraph import ops
from tilegraph.testing.reference import REFERENCES


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_every_op_has_a_reference():
    assert set(ops.__all__) == set(REFERENCES)


def brute_conv_nhwc(x, w, stride, pad, dil):
    n, h, wd, ci = x.shape
    kh, kw, _, co = w.shape
    xp = np.pad(x, [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, co))
    for b, i, j, c in np.ndindex(n, oh, ow, co):
        for di, dj in np.ndindex(kh, kw):
            out[b, i, j, c] += xp[b, i * stride + di * dil, j * stride + dj * dil] @ w[di, dj, :, c]
    return out


def test_dilated_conv_matches_brute_force(rng):
    x, w = rng.standard_normal((1, 7, 6, 2)), rng.standard_normal((3, 2, 2, 3))
    np.testing.assert_allclose(REFERENCES["conv2d_nhwc"](x, w, 2, 1, 2), brute_conv_nhwc(x, w, 2, 1, 2))


def test_grouped_conv_is_per_group_convs(rng):
    x, w = rng.standard_normal((1, 5, 5, 6)), rng.standard_normal((3, 3, 2, 9))
    got = REFERENCES["conv2d_nhwc"](x, w, 1, 1, groups=3)
    parts = [brute_conv_nhwc(x[..., 2 * g:2 * g + 2], w[..., 3 * g:3 * g + 3], 1, 1, 1) for g in range(3)]
    np.testing.assert_allclose(got, np.concatenate(parts, axis=-1))


def test_depthwise_is_a_grouped_conv(rng):
    x, w = rng.standard_normal((1, 6, 5, 4)), rng.standard_normal((3, 3, 4, 2))
    got = REFERENCES["depthwise_conv2d_nhwc"](x, w, 2, 1)
    grouped_w = w.reshape(3, 3, 1, 8)  # output channel c*2 + m reads input channel c
    np.testing.assert_allclose(got, REFERENCES["conv2d_nhwc"](x, grouped_w, 2, 1, groups=4))


def test_conv1d_and_nchw_agree_with_conv2d_nhwc(rng):
    x, w = rng.standard_normal((2, 9, 3)), rng.standard_normal((3, 3, 4))
    as_2d = REFERENCES["conv2d_nhwc"](x[:, None], w[None], (1, 2), (0, 1), (1, 2))[:, 0]
    np.testing.assert_allclose(REFERENCES["conv1d_nlc"](x, w, 2, 1, 2), as_2d)
    x4, w4 = rng.standard_normal((1, 3, 6, 5)), rng.standard_normal((4, 3, 3, 2))
    nhwc = REFERENCES["conv2d_nhwc"](x4.transpose(0, 2, 3, 1), w4.transpose(2, 3, 1, 0), 1, 1)
    np.testing.assert_allclose(REFERENCES["conv2d_nchw"](x4, w4, 1, 1), nhwc.transpose(0, 3, 1, 2))


def test_capsule_matches_brute_force(rng):
    x, w = rng.standard_normal((1, 4, 4, 2, 2, 3)), rng.standard_normal((3, 3, 2, 2, 3, 2))
    got = REFERENCES["conv2d_capsule_nhwijc"](x, w, 1, 1, 2)
    xp = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0), (0, 0), (0, 0)])
    out = np.zeros(got.shape)
    for n, h, ww, i, j, co in np.ndindex(*got.shape):
        out[n, h, ww, i, j, co] = np.einsum("abkc,abkc->", xp[n, h:h + 3, ww:ww + 3, i], w[:, :, :, j, :, co])
    np.testing.assert_allclose(got, out)


def test_pools_match_brute_force(rng):
    x = rng.standard_normal((1, 5, 4, 2))
    mx = REFERENCES["max_pool2d"](x, 3, 2, 1)
    av = REFERENCES["avg_pool2d"](x, 3, 2, 1)
    for i, j in np.ndindex(mx.shape[1], mx.shape[2]):
        window = x[0, max(2 * i - 1, 0):2 * i + 2, max(2 * j - 1, 0):2 * j + 2]
        np.testing.assert_allclose(mx[0, i, j], window.max(axis=(0, 1)))
        np.testing.assert_allclose(av[0, i, j], window.mean(axis=(0, 1)))
    nchw = REFERENCES["max_pool2d"](x.transpose(0, 3, 1, 2), 3, 2, 1, layout="NCHW")
    np.testing.assert_allclose(nchw, mx.transpose(0, 3, 1, 2))


def test_normalisations(rng):
    x = rng.standard_normal((3, 4, 5)) * 3 + 1
    sm = REFERENCES["softmax"](x, axis=1)
    np.testing.assert_allclose(sm.sum(axis=1), 1.0)
    ln = REFERENCES["layer_norm"](x, np.ones((4, 5)), np.zeros((4, 5)), axis=(1, 2), epsilon=0.0)
    np.testing.assert_allclose(ln.mean(axis=(1, 2)), 0.0, atol=1e-12)
    np.testing.assert_allclose(ln.var(axis=(1, 2)), 1.0)
    np.testing.assert_allclose(REFERENCES["norm_bmn"](x), [np.linalg.norm(m) for m in x])
    ones, zeros = np.ones(4), np.zeros(4)
    np.testing.assert_allclose(REFERENCES["batch_norm"](x, zeros, ones, ones, zeros, axis=1, epsilon=0.0), x)


def test_transpose_batch_matmul_is_q_times_v_transposed(rng):
    q, v = rng.standard_normal((2, 5, 3, 4)), rng.standard_normal((2, 5, 3, 4))
    got = REFERENCES["transpose_batch_matmul"](q, v)
    qt, vt = q.transpose(0, 2, 1, 3), v.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, qt @ vt)
