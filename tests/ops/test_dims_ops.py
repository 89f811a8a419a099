"""The ops that take run-time dims (ops._common.DIMS_OPS), composed into an attention layer over a
sequence of run-time length, against a float64 numpy reference at lengths 1, odd ones and the
upper bound, with every input element past the length poisoned (NaN): interpreter and C."""

import math

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.te.dims import dim, dims_array

UPPER, HIDDEN, HEADS = 17, 16, 2
HEAD = HIDDEN // HEADS


def encoder_layer():
    """x (seq, HIDDEN) -> attention, residual, layer norm, GELU; and the mean over the sequence."""
    seq = dim("seq", UPPER)
    x = te.placeholder((seq, HIDDEN), name="x")
    weights = {n: te.placeholder((HIDDEN, HIDDEN), name=f"w{n}") for n in "qkvo"}
    biases = {n: te.placeholder((HIDDEN,), name=f"b{n}") for n in "qkvo"}
    gamma, beta = te.placeholder((HIDDEN,), name="gamma"), te.placeholder((HIDDEN,), name="beta")

    def heads(n):
        projected = ops.dense(x, weights[n], biases[n], name=f"proj_{n}")
        return ops.transpose(ops.reshape(projected, (seq, HEADS, HEAD), name=f"split_{n}"), (1, 0, 2),
                             name=f"heads_{n}")

    q, k, v = heads("q"), heads("k"), heads("v")
    scores = ops.mul(ops.batch_matmul(q, ops.transpose(k, (0, 2, 1), name="k_t"), name="qk"), HEAD ** -0.5,
                     name="scaled")
    probs = ops.softmax(scores, axis=-1, name="probs")
    context = ops.batch_matmul(probs, v, name="context")
    merged = ops.reshape(ops.transpose(context, (1, 0, 2), name="merge_t"), (seq, HIDDEN), name="merged")
    attended = ops.add(ops.dense(merged, weights["o"], biases["o"], name="proj_o"), x, name="residual")
    normed = ops.layer_norm(attended, gamma, beta, name="ln")
    out = ops.gelu(normed, name="out")
    pooled = ops.mean(out, axis=0, name="pooled")
    inputs = [x, *weights.values(), *biases.values(), gamma, beta]
    return te.Workload(inputs, [out, pooled])


def reference(arrays, n):
    x, wq, wk, wv, wo, bq, bk, bv, bo, gamma, beta = (a.astype(np.float64) for a in arrays)
    x = x[:n]

    def heads(w, b):
        return (x @ w.T + b).reshape(n, HEADS, HEAD).transpose(1, 0, 2)

    q, k, v = heads(wq, bq), heads(wk, bk), heads(wv, bv)
    s = q @ k.transpose(0, 2, 1) * HEAD ** -0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    merged = (p @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
    a = merged @ wo.T + bo + x
    normed = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * gamma + beta
    from scipy.special import erf

    out = 0.5 * normed * (1 + erf(normed / np.sqrt(2)))
    return out, out.mean(0)


def arrays_for(n, seed):
    rng = np.random.default_rng(seed)
    x = np.full((UPPER, HIDDEN), np.nan, np.float32)
    x[:n] = rng.standard_normal((n, HIDDEN))
    weights = [(rng.standard_normal((HIDDEN, HIDDEN)) * 0.3).astype(np.float32) for _ in range(4)]
    biases = [rng.standard_normal(HIDDEN).astype(np.float32) for _ in range(4)]
    return [x, *weights, *biases, (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
            (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)]


@pytest.mark.parametrize("runner", ["interpreter", pytest.param("c", marks=pytest.mark.needs_cc)])
def test_an_attention_layer_over_a_run_time_sequence(runner):
    wl = encoder_layer()
    assert [d.name for d in wl.dims] == ["seq"]
    kernel = tg.build(wl) if runner == "c" else None
    for n in (1, 4, 9, UPPER):
        arrays = arrays_for(n, seed=n)
        dims = dims_array(wl.dims, {"seq": n})
        out, pooled = kernel(*arrays, dims) if kernel else tg.interpret(wl, *arrays, dims)
        ref_out, ref_pooled = reference(arrays, n)
        assert np.isfinite(out[:n]).all() and np.isfinite(pooled).all()
        np.testing.assert_allclose(out[:n], ref_out, rtol=1e-4, atol=1e-4, err_msg=f"seq={n}")
        np.testing.assert_allclose(pooled, ref_pooled, rtol=1e-4, atol=1e-4, err_msg=f"seq={n}")


def test_extents_of_ops_follow_the_dims():
    seq = dim("seq", 8)
    x = te.placeholder((seq, 6), name="x")
    assert [str(e) for e in ops.reshape(x, (seq, 2, 3)).extents] == ["seq", "2", "3"]
    assert [str(e) for e in ops.transpose(ops.reshape(x, (seq, 2, 3)), (1, 2, 0)).extents] == ["2", "3", "seq"]
    assert [str(e) for e in ops.add(x, te.placeholder((6,), name="b")).extents] == ["seq", "6"]
    assert ops.sum(x, axis=0).extents == (6,)
    assert [str(e) for e in ops.matmul(x, te.placeholder((6, 5), name="w")).extents] == ["seq", "5"]


@pytest.mark.parametrize("build, match", [
    (lambda x, seq: ops.add(x, te.placeholder((8, 6), name="y")), "do not broadcast"),
    (lambda x, seq: ops.reshape(x, (seq, 3)), "not as many elements at every value of the dims"),
    (lambda x, seq: ops.reshape(x, (seq, 4, 2)), "not as many elements at every value of the dims"),
    (lambda x, seq: ops.reshape(x, (2 * seq, 4)), r"\['seq', '6'\] to \['\(seq \* 2\)', '4'\]: not as many"),
    (lambda x, seq: ops.matmul(x, te.placeholder((8, 5), name="w"), transpose_a=True), "disagree"),
    (lambda x, seq: ops.layer_norm(x, te.placeholder((8,), name="g"), te.placeholder((8,), name="b"), axis=0),
     "static extents only"),
])
def test_dims_that_do_not_fit_an_op_are_one_line_errors(build, match):
    seq = dim("seq", 8)
    x = te.placeholder((seq, 6), name="x")
    with pytest.raises(ValueError, match=match):
        build(x, seq)


@pytest.mark.parametrize("runner", ["interpreter", pytest.param("c", marks=pytest.mark.needs_cc)])
def test_rows_of_a_batch_of_sequences_merged_and_split(runner):
    """(batch, seq, 3) -> (batch*seq, 3) packs the rows (row b*seq + s is stored at b*S + s in x, so
    the reshape moves elements: not a view), a product of them, and back; plus (batch, 2, seq) ->
    (2*batch, seq), which keeps x's storage. Inputs past the extents poisoned."""
    from tilegraph.ops.transform import reshape_keeps_storage

    batch, seq = dim("batch", 3), dim("seq", 5)
    x = te.placeholder((batch, seq, 3), name="x")
    w = te.placeholder((3, 4), name="w")
    rows = ops.reshape(x, (batch * seq, 3), name="rows")
    product = ops.matmul(rows, w, name="product")
    back = ops.reshape(product, (batch, seq, 4), name="back")
    y = te.placeholder((batch, 2, seq), name="y")
    heads = ops.reshape(y, (2 * batch, seq), name="heads")
    def keeps(a, b):
        return reshape_keeps_storage(a.extents, a.shape, b.extents, b.shape)

    assert not keeps(x, rows) and not keeps(product, back)
    assert keeps(y, heads) and keeps(rows, ops.reshape(rows, (batch * seq, 3)))
    assert keeps(ops.reshape(x, (batch, seq * 3)), x) and not keeps(ops.reshape(y, (batch, 2 * seq)), y)
    one = te.placeholder((1, seq, 3), name="one")  # a static batch of 1: its rows stay where they are
    assert keeps(one, ops.reshape(one, (seq, 3))) and keeps(ops.reshape(one, (seq, 3)), one)
    wl = te.Workload([x, w, y], [rows, back, heads])
    kernel = tg.build(wl) if runner == "c" else None
    rng = np.random.default_rng(5)
    for b, n in ((1, 1), (2, 3), (3, 5), (1, 5), (3, 1)):
        xs = np.full((3, 5, 3), np.nan, np.float32)
        xs[:b, :n] = rng.standard_normal((b, n, 3))
        ys = np.full((3, 2, 5), np.nan, np.float32)
        ys[:b, :, :n] = rng.standard_normal((b, 2, n))
        ws = rng.standard_normal((3, 4)).astype(np.float32)
        args = (xs, ws, ys, dims_array(wl.dims, {"batch": b, "seq": n}))
        got_rows, got_back, got_heads = kernel(*args) if kernel else tg.interpret(wl, *args)
        expected_rows = xs[:b, :n].astype(np.float64).reshape(b * n, 3)
        np.testing.assert_array_equal(got_rows[:b * n], expected_rows)
        np.testing.assert_allclose(got_back[:b, :n], (expected_rows @ ws).reshape(b, n, 4), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got_heads[:2 * b, :n], ys[:b, :, :n].reshape(2 * b, n))


@pytest.mark.parametrize("runner", ["interpreter", pytest.param("c", marks=pytest.mark.needs_cc)])
def test_a_convolutional_network_over_a_run_time_batch(runner):
    """conv (padded, strided), depthwise conv, a winograd convolution, batch norm, max and average
    pooling and global average pooling over a batch of run-time size (ops/_common.BATCH_DIMS_OPS),
    three kernels, against float64 references, images past the batch poisoned."""
    from tilegraph.ops import winograd
    from tilegraph.testing import reference as ref

    batch = dim("batch", 3)
    tiles = math.prod(winograd.tiles((5, 5), 4))
    x = te.placeholder((batch, 9, 9, 4), name="x")
    w, dw = te.placeholder((3, 3, 4, 8), name="w"), te.placeholder((3, 3, 8, 1), name="dw")
    depth = ops.depthwise_conv2d_nhwc(ops.relu(ops.conv2d_nhwc(x, w, stride=2, padding=1)), dw, padding=1)
    d = te.placeholder((batch, 5, 5, 8), name="d")
    ww = te.placeholder((36, 8, 8), name="ww")  # winograd F(4x4) weights
    v = ops.reshape(ops.winograd_input_nhwc(d, 4, (1, 1, 1, 1)), (36, batch * tiles, 8), name="v36")
    mm = ops.reshape(ops.batch_matmul(v, ww, name="mm"), (6, 6, batch * tiles, 8), name="mm66")
    wino = ops.winograd_output_nhwc(mm, 4, 3, (5, 5))
    e = te.placeholder((batch, 5, 5, 8), name="e")
    stats = [te.placeholder((8,), name=n) for n in ("mean", "var", "gamma", "beta")]
    normed = ops.batch_norm(e, *stats, axis=3)
    pooled = ops.max_pool2d(normed, 3, 2, 1, name="pooled")
    averaged = ops.avg_pool2d(normed, 2, 1, 0, name="averaged")
    glob = ops.global_avg_pool2d(pooled, name="glob")
    assert str(wino.extents[0]) == "batch" and str(glob.extents[0]) == "batch"
    workloads = [te.Workload([x, w, dw], [depth]), te.Workload([d, ww], [wino]),
                 te.Workload([e, *stats], [pooled, averaged, glob])]
    kernels = [tg.build(wl) if runner == "c" else None for wl in workloads]
    rng = np.random.default_rng(11)
    weights = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((3, 3, 4, 8), (3, 3, 8, 1), (3, 3, 8, 8))]
    ww_array = winograd.transform_weights(weights[2], 4).reshape(36, 8, 8).astype(np.float32)
    stat_arrays = [rng.standard_normal(8).astype(np.float32), rng.uniform(0.5, 2, 8).astype(np.float32),
                   rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)]

    def run(k, *arrays, b):
        args = (*arrays, dims_array(workloads[k].dims, {"batch": b}))
        got = kernels[k](*args) if kernels[k] else tg.interpret(workloads[k], *args)
        return got if isinstance(got, (list, tuple)) else [got]

    def poisoned(a):
        out = np.full((3, *a.shape[1:]), np.nan, np.float32)
        out[:len(a)] = a
        return out

    for b in (1, 2, 3):
        x64 = rng.standard_normal((b, 9, 9, 4))
        d64 = ref.depthwise_conv2d_nhwc(np.maximum(ref.conv2d_nhwc(x64, weights[0].astype(np.float64), 2, 1), 0),
                                        weights[1].astype(np.float64), 1, 1)
        (got,) = run(0, poisoned(x64), weights[0], weights[1], b=b)
        np.testing.assert_allclose(got[:b], d64, rtol=1e-4, atol=1e-4, err_msg=f"batch={b}")
        e64 = ref.conv2d_nhwc(d64, weights[2].astype(np.float64), 1, 1)
        (got,) = run(1, poisoned(d64), ww_array, b=b)
        np.testing.assert_allclose(got[:b], e64, rtol=1e-4, atol=1e-4, err_msg=f"batch={b}")
        mean, var, gamma, beta = (a.astype(np.float64) for a in stat_arrays)
        n64 = (e64 - mean) / np.sqrt(var + 1e-5) * gamma + beta
        expected = [ref.max_pool2d(n64, 3, 2, 1), ref.avg_pool2d(n64, 2, 1, 0)]
        expected.append(expected[0].mean(axis=(1, 2), keepdims=True))
        for g, ex in zip(run(2, poisoned(e64), *stat_arrays, b=b), expected):
            assert np.isfinite(g[:b]).all(), f"batch={b}"
            np.testing.assert_allclose(g[:b], ex, rtol=1e-4, atol=1e-4, err_msg=f"batch={b}")


def decode_step(max_past=9, max_seq=4, width=8):
    """One attention step of a decoder with a KV cache: `seq` new rows attend to `past` cached ones
    and to themselves (causally); the grown caches are outputs too. Both lengths run-time."""
    past, seq = dim("past", max_past), dim("seq", max_seq)
    q = te.placeholder((seq, width), name="q")
    k_cache, v_cache = te.placeholder((past, width), name="k_cache"), te.placeholder((past, width), name="v_cache")
    k_new, v_new = te.placeholder((seq, width), name="k_new"), te.placeholder((seq, width), name="v_new")
    keys = ops.concat([k_cache, k_new], axis=0, name="keys")
    values = ops.concat([v_cache, v_new], axis=0, name="values")
    scores = ops.matmul(q, keys, transpose_b=True, name="scores")
    masked = te.compute((seq, past + seq), lambda i, j: te.select(j.le(i + past), scores[i, j] * width ** -0.5,
                                                                  te.const(float("-inf"))), name="masked")
    out = ops.matmul(ops.softmax(masked, name="probs"), values, name="out")
    return te.Workload([q, k_cache, v_cache, k_new, v_new], [out, keys, values])


@pytest.mark.parametrize("runner", ["interpreter", pytest.param("c", marks=pytest.mark.needs_cc)])
def test_a_decoder_step_with_a_kv_cache_of_run_time_length(runner):
    wl = decode_step()
    from tilegraph.te.printer import expr_str

    keys_out = wl.outputs[1]  # the grown cache: stored for 9 + 4 rows, past + seq of them hold data
    assert keys_out.shape == (13, 8) and expr_str(keys_out.bounds[0]) == "(past + seq)" and keys_out.bounds[1] is None
    kernel = tg.build(wl) if runner == "c" else None
    rng = np.random.default_rng(3)
    for past, seq in ((1, 1), (5, 1), (7, 3), (9, 4)):
        def poisoned(rows, upper):
            a = np.full((upper, 8), np.nan, np.float32)
            a[:rows] = rng.standard_normal((rows, 8))
            return a

        q, k_new, v_new = poisoned(seq, 4), poisoned(seq, 4), poisoned(seq, 4)
        k_cache, v_cache = poisoned(past, 9), poisoned(past, 9)
        arrays = (q, k_cache, v_cache, k_new, v_new, dims_array(wl.dims, {"past": past, "seq": seq}))
        out, keys, values = kernel(*arrays) if kernel else tg.interpret(wl, *arrays)
        k = np.concatenate([k_cache[:past], k_new[:seq]]).astype(np.float64)
        v = np.concatenate([v_cache[:past], v_new[:seq]]).astype(np.float64)
        s = q[:seq].astype(np.float64) @ k.T * 8 ** -0.5
        s[np.arange(past + seq)[None, :] > np.arange(seq)[:, None] + past] = -np.inf
        p = np.exp(s - s.max(1, keepdims=True))
        ref = (p / p.sum(1, keepdims=True)) @ v
        np.testing.assert_allclose(keys[:past + seq], k, err_msg=f"past={past} seq={seq}")
        np.testing.assert_allclose(values[:past + seq], v, err_msg=f"past={past} seq={seq}")
        np.testing.assert_allclose(out[:seq], ref, rtol=1e-5, atol=1e-5, err_msg=f"past={past} seq={seq}")


def masked_scores(upper=11, heads=2, width=4):
    """The ops a transformer's exported graph adds around attention, over a run-time length:
    4-D products (matmul_nd, batch broadcast), a mask from comparisons and where, isnan guarding the
    softmax, a cast, a whole-axis slice of a fused projection, broadcast_to over the dim, clip."""
    seq = dim("seq", upper)
    x = te.placeholder((1, seq, 3 * width), name="x")
    mask = te.placeholder((1, 1, 1, seq), "int64", name="mask")
    q = ops.strided_slice(x, (0, 0, 0), (1, upper, width), name="q")  # the seq axis whole
    k = ops.strided_slice(x, (0, 0, width), (1, upper, 2 * width), name="k")
    qh = ops.transpose(ops.reshape(q, (1, seq, heads, width // heads), name="q4"), (0, 2, 1, 3), name="qh")
    kh = ops.transpose(ops.reshape(k, (1, seq, heads, width // heads), name="k4"), (0, 2, 3, 1), name="kh")
    scores = ops.matmul_nd(qh, kh, name="scores")
    zero, neg, zeros = (te.placeholder((1,), "int64", name="zero"), te.placeholder((1,), name="neg"),
                        te.placeholder((1,), name="zeros"))
    keep = ops.broadcast_to(ops.greater(mask, zero), (1, heads, seq, seq), name="keep")
    masked = ops.where(keep, scores, neg, name="masked")
    probs = ops.softmax(masked, axis=-1, name="probs")
    safe = ops.where(ops.isnan(probs), zeros, probs, name="safe")
    out = ops.clip(ops.cast(safe, "float64", name="wide"), 0.0, 0.75, name="out")
    return te.Workload([x, mask, zero, neg, zeros], [out])


@pytest.mark.parametrize("runner", ["interpreter", pytest.param("c", marks=pytest.mark.needs_cc)])
def test_masks_slices_and_4d_products_over_a_run_time_length(runner):
    wl = masked_scores()
    kernel = tg.build(wl) if runner == "c" else None
    rng = np.random.default_rng(5)
    for n in (1, 6, 11):
        x = np.full((1, 11, 12), np.nan, np.float32)
        x[:, :n] = rng.standard_normal((1, n, 12))
        mask = np.full((1, 1, 1, 11), -7, np.int64)
        mask[..., :n] = rng.integers(0, 2, n)
        mask[..., 0] = 1
        consts = [np.zeros(1, np.int64), np.full(1, -np.inf, np.float32), np.zeros(1, np.float32)]
        dims = dims_array(wl.dims, {"seq": n})
        out = kernel(x, mask, *consts, dims) if kernel else tg.interpret(wl, x, mask, *consts, dims)
        xs = x[0, :n].astype(np.float64)
        q = xs[:, :4].reshape(n, 2, 2).transpose(1, 0, 2)
        k = xs[:, 4:8].reshape(n, 2, 2).transpose(1, 2, 0)
        s = np.where(mask[0, 0, 0, :n] > 0, q @ k, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        np.testing.assert_allclose(out[0, :, :n, :n], np.clip(p, 0, 0.75), rtol=1e-5, atol=1e-6, err_msg=f"seq={n}")


def test_a_slice_takes_a_run_time_axis_whole_or_refuses():
    seq = dim("seq", 8)
    x = te.placeholder((seq, 6), name="x")
    assert [str(e) for e in ops.strided_slice(x, (0, 2), (8, 6)).extents] == ["seq", "4"]
    with pytest.raises(ValueError, match="run-time extent whole"):
        ops.strided_slice(x, (1, 0), (8, 6))
    with pytest.raises(ValueError, match="does not broadcast"):
        ops.broadcast_to(x, (2, 8, 6))
