"""Per-store features against values computed by hand."""

import math

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.tune.cost_model.features import FEATURE_NAMES, NUM_FEATURES, program_features, store_features


def lg(x):
    return math.log2(1 + x)


def _named(row):
    assert len(row) == NUM_FEATURES
    return dict(zip(FEATURE_NAMES, row))


def _matmul(m=4, n=8, k=16):
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tg.Workload([a, b], [c])


def test_a_plain_matmul_nest():
    # for i in 4: for j in 8: for k in 16: C[i, j] = C[i, j] + A[i, k] * B[k, j]
    (row,) = store_features(tg.Schedule(_matmul()).func)
    f = _named(row)
    assert f["ops.add_sub"] == pytest.approx(lg(512)) and f["ops.mul"] == pytest.approx(lg(512))
    assert f["ops.fma"] == pytest.approx(lg(512)) and f["ops.div"] == 0 and f["ops.math_call"] == 0
    assert f["outer.loops"] == 3 and f["outer.iterations"] == pytest.approx(lg(512))
    assert all(f[f"{a}.count"] == 0 for a in ("vectorized", "unrolled", "parallel"))
    # buffers by bytes: C (stored and loaded: 2 x 512 x 4 bytes), then A and B (512 x 4 each)
    assert f["buf0.is_read_write"] == 1 and f["buf0.bytes"] == pytest.approx(lg(4096))
    assert f["buf0.unique_bytes"] == pytest.approx(lg(4 * 8 * 4))
    assert f["buf0.stride"] == 0  # C does not move along k
    assert f["buf0.has_reuse"] == 1 and f["buf0.reuse_count"] == pytest.approx(lg(16))
    assert f["buf0.reuse_iters"] == pytest.approx(lg(1))
    # A[i, k]: stride 1 along k; re-read across j (8 times), 16 iterations and 64 bytes apart
    assert f["buf1.is_read"] == 1 and f["buf1.bytes"] == pytest.approx(lg(2048))
    assert f["buf1.unique_bytes"] == pytest.approx(lg(4 * 16 * 4)) and f["buf1.stride"] == pytest.approx(lg(1))
    assert f["buf1.reuse_count"] == pytest.approx(lg(8)) and f["buf1.reuse_iters"] == pytest.approx(lg(16))
    assert f["buf1.reuse_bytes"] == pytest.approx(lg(64))
    # B[k, j]: stride 8 along k; re-read across i (4 times), 8 x 16 iterations and all 512 bytes apart
    assert f["buf2.unique_bytes"] == pytest.approx(lg(512)) and f["buf2.stride"] == pytest.approx(lg(8))
    assert f["buf2.reuse_count"] == pytest.approx(lg(4)) and f["buf2.reuse_iters"] == pytest.approx(lg(128))
    assert f["buf2.reuse_bytes"] == pytest.approx(lg(512))
    assert f["buf3.bytes"] == 0  # only three buffers: zero-padded
    # arithmetic intensity of the whole nest: 2 flops x 512 / (128 + 256 + 512) unique bytes
    assert f["intensity.0"] == pytest.approx(lg(1024 / 896))


def test_annotations_of_a_vectorized_parallel_elementwise_nest():
    a = te.placeholder((6, 8), name="A")
    wl = tg.Workload([a], [te.compute((6, 8), lambda i, j: a[i, j] * 2.0, name="B")])
    sch = tg.Schedule(wl)
    i, j = sch.loops("B")
    sch.parallel(i)
    sch.vectorize(j)
    f = _named(store_features(sch.func)[0])
    assert f["vectorized.count"] == 1 and f["vectorized.product"] == pytest.approx(lg(8))
    assert f["vectorized.is_innermost"] == 1
    assert f["parallel.count"] == 1 and f["parallel.inner_extent"] == pytest.approx(lg(6))
    assert f["parallel.is_innermost"] == 0 and f["unrolled.count"] == 0
    assert f["ops.mul"] == pytest.approx(lg(48)) and f["ops.add_sub"] == 0
    assert f["buf0.is_write"] == 1 and f["buf1.is_read"] == 1
    assert f["buf0.stride"] == pytest.approx(lg(1)) and f["buf0.has_reuse"] == 0


def test_one_row_per_store_and_a_local_accumulator():
    sch = tg.Schedule(_matmul())
    wb = sch.cache_write("C", "local")
    feats = program_features(sch.func)
    assert feats.shape == (2, NUM_FEATURES)
    names = FEATURE_NAMES.index("alloc.is_local")
    assert sorted(feats[:, names].tolist()) == [0.0, 1.0]
    assert wb in sch.block_names()


def test_feature_cache_featurises_a_program_once():
    import random

    from tilegraph.tune.cost_model import FeatureCache
    from tilegraph.tune.cost_model.features import PER_STORE_FEATURES
    from tilegraph.tune.space.program import sample

    wl = tg.workloads.from_spec("matmul:16,24,32")
    cache = FeatureCache(PER_STORE_FEATURES)
    a, b = sample(wl, "multi_level_tiling", random.Random(0)), sample(wl, "multi_level_tiling", random.Random(1))
    fa = cache(a)
    assert cache(a) is fa and np.array_equal(fa, program_features(a.func))
    assert a.trace_json == b.trace_json or cache(b) is not fa
