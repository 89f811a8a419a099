"""GPU per-store features: the CPU columns plus the launch shape and the first warp's memory
behaviour, against values worked out by hand."""

import math
import random

import numpy as np

from tilegraph import workloads
from tilegraph.target import Target
from tilegraph.tune.cost_model import default_cost_model, feature_set_for
from tilegraph.tune.cost_model.features import NUM_FEATURES, program_features
from tilegraph.tune.cost_model.gpu_features import GPU_COLUMNS, GPU_FEATURE_WIDTH, gpu_program_features
from tilegraph.tune.space.program import sample


def lg(x):
    return math.log2(1 + x)


def _flat(spec, threads_index=1):  # gpu_flat with FLAT_THREADS[threads_index] = 64 threads a block
    return sample(workloads.from_spec(spec), "gpu_flat", random.Random(0), [threads_index]).func


def _gpu(row):
    return dict(zip(GPU_COLUMNS, row[NUM_FEATURES:]))


def test_the_cpu_columns_come_first_and_the_widths_add_up():
    func = _flat("relu:16,40")
    feats = gpu_program_features(func)
    assert feats.shape == (1, GPU_FEATURE_WIDTH) and GPU_FEATURE_WIDTH == NUM_FEATURES + len(GPU_COLUMNS)
    np.testing.assert_array_equal(feats[:, :NUM_FEATURES], program_features(func))


def test_a_coalesced_elementwise_kernel():
    # for b in blockIdx.x(10): for t in threadIdx.x(64): out[b*64 + t] = max(a[b*64 + t], 0)
    # a warp reads 32 consecutive floats: 4 sectors of 32 B, the fewest its 128 bytes need
    g = _gpu(gpu_program_features(_flat("relu:16,40"))[0])
    assert g["gpu.threads"] == lg(64) and g["gpu.blocks"] == lg(10) and g["gpu.vthreads"] == lg(1)
    assert g["gpu.global_accesses"] == 2 and g["gpu.uncoalesced"] == 0
    assert g["gpu.worst_sectors_ratio"] == lg(1.0) and g["gpu.shared_accesses"] == 0


def test_a_transpose_reads_uncoalesced():
    # out[i, j] = a[j, i], threads along j: the store is coalesced, the load strides 64 floats
    # between lanes, so the warp touches 32 sectors where its 128 bytes need 4 (ratio 8)
    g = _gpu(gpu_program_features(_flat("transpose:64,64"))[0])
    assert g["gpu.global_accesses"] == 2 and g["gpu.uncoalesced"] == 1
    assert g["gpu.worst_sectors_ratio"] == lg(8.0) and g["gpu.mean_sectors_ratio"] == lg(4.5)


def test_shared_staging_is_seen():
    wl = workloads.from_spec("matmul:64,48,40")
    # block [1, 2, 2, 16] x [1, 1, 40, 1], k [48, 1], staged in shared memory, rows not padded
    func = sample(wl, "gpu_multi_level_tiling", random.Random(0), [[1, 2, 2, 16], [1, 1, 40, 1], [48, 1], 1, 0]).func
    rows = [_gpu(r) for r in gpu_program_features(func)]
    assert all(r["gpu.shared_bytes"] == lg((64 * 48 + 48 * 40) * 4) for r in rows)
    assert max(r["gpu.threads"] for r in rows) == lg(80) and max(r["gpu.vthreads"] for r in rows) == lg(2)
    assert sum(r["gpu.shared_accesses"] for r in rows) >= 4  # two staging stores, two reads in the update


def test_the_default_model_takes_the_targets_feature_set():
    assert feature_set_for(Target("opencl")).name == "per-store-gpu"
    assert feature_set_for(Target("cuda")).name == "per-store-gpu"
    assert feature_set_for(Target.from_string("cpu -isa=avx2")).name == feature_set_for(None).name == "per-store"
    assert default_cost_model(Target("opencl")).feature_set.width == GPU_FEATURE_WIDTH
