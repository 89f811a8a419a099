"""The micro-performance model: the effects it prices (strided unpacked panels, guards, fused
parallel loops) and its ranking of measured GEMM kernels."""

from __future__ import annotations

from dataclasses import replace

import pytest
from scipy.stats import spearmanr

import tilegraph as tg
from tilegraph import te
from tilegraph.tune.gensor.perf_model import PerfModel
from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
from tilegraph.tune.hardware import HardwareModel

from .conftest import matmul_workload

# The machine the measurements below were taken on (AMD Zen 4, AVX-512), restricted to 1 core.
ZEN4_1T = HardwareModel(
    isa="avx512", cores=1, simd_lanes_fp32=16, fma_units=1, fma_latency_cycles=4, vector_registers=32,
    l1d_bytes=32768, l2_bytes=1048576, l3_bytes=33554432, peak_flops_1t=117.6e9, peak_flops_all=117.6e9,
    bandwidth_bytes={"dram": 22.6e9, "l1": 209.8e9, "l2": 104.4e9, "l3": 19.3e9}, measured=True,
    fingerprint="test-zen4",
)

# GMM-4 (1x1024x1024x1024) kernels measured single-threaded with benchmarks/model_quality.py:
# (reg (i, j), l2 block (i, j), unroll, parallel, B packed, measured ms), fastest first.
GMM4_MEASURED = [
    ((4, 16), (260, 128), 4, 0, True, 21.8),
    ((7, 16), (14, 64), 1, 0, True, 33.6),
    ((1, 32), (1024, 256), 8, 0, True, 52.3),
    ((2, 16), (10, 64), 2, 0, True, 57.6),
    ((3, 48), (6, 96), 1, 1, False, 68.2),
    ((2, 64), (4, 128), 1, 0, False, 75.2),
    ((7, 16), (385, 256), 1, 2, True, 82.8),
    ((6, 16), (6, 16), 2, 1, True, 88.3),
    ((2, 16), (1024, 192), 8, 0, True, 98.6),
    ((1, 48), (2, 96), 8, 0, True, 108.7),
    ((5, 32), (5, 64), 1, 2, False, 116.4),
    ((4, 64), (16, 64), 1, 2, False, 126.5),
    ((1, 64), (2, 128), 1, 0, False, 136.0),
    ((3, 32), (1026, 384), 2, 1, False, 148.8),
    ((5, 32), (10, 32), 2, 2, False, 157.1),
    ((2, 32), (512, 192), 2, 1, False, 161.2),
    ((2, 32), (2, 32), 8, 0, False, 179.6),
    ((3, 16), (3, 64), 1, 1, False, 186.2),
    ((1, 64), (1024, 192), 2, 1, True, 201.0),
    ((2, 16), (256, 128), 1, 1, False, 210.7),
    ((1, 48), (2, 96), 4, 1, False, 214.6),
    ((2, 32), (2, 64), 1, 0, False, 229.5),
    ((1, 48), (576, 384), 8, 0, True, 249.8),
    ((2, 16), (384, 128), 8, 1, False, 260.2),
    ((1, 16), (1, 16), 4, 2, False, 277.1),
    ((1, 32), (512, 192), 2, 1, True, 299.4),
    ((1, 32), (1024, 64), 2, 1, False, 320.2),
    ((2, 96), (4, 192), 4, 2, False, 376.1),
    ((2, 16), (384, 96), 4, 2, False, 400.5),
    ((1, 16), (4, 32), 4, 1, False, 602.1),
]


def gmm4() -> tuple[IterSpace, PerfModel]:
    a = te.placeholder((1, 1024, 1024), name="a")
    b = te.placeholder((1, 1024, 1024), name="b")
    k = te.reduce_axis(1024, "k")
    c = te.compute((1, 1024, 1024), lambda bb, i, j: te.sum(a[bb, i, k] * b[bb, k, j], axis=k), name="c")
    space = IterSpace.from_workload(tg.Workload([a, b], [c]))
    return space, PerfModel(space, ZEN4_1T)


def gemm_state(space: IterSpace, reg: tuple[int, int], l2: tuple[int, int], unroll: int = 4, parallel: int = 1,
               packed: bool = True) -> EtirState:
    s = EtirState((1, *reg), (1, *reg), (1, *l2), (1024,), 2, 16, unroll, parallel, ("b",) if packed else ())
    return canonical(space, s)


def test_model_ranks_measured_gemm_kernels() -> None:
    space, model = gmm4()
    predicted = [model.predict(gemm_state(space, reg, l2, u, p, packed)) for reg, l2, u, p, packed, _ in GMM4_MEASURED]
    measured = [ms for *_, ms in GMM4_MEASURED]
    assert spearmanr(predicted, measured).statistic >= 0.7
    best = min(range(len(predicted)), key=predicted.__getitem__)
    assert measured[best] <= 2 * min(measured)


def test_unpacked_strided_panel_is_latency_bound() -> None:
    space, model = gmm4()
    packed = gemm_state(space, (4, 16), (512, 128), packed=True)
    unpacked = replace(packed, pack=())
    assert model.predict(unpacked) > 3 * model.predict(packed)
    # one latency-bound touch per row of the panel: halving the rows per tile halves the time
    wide = gemm_state(space, (4, 32), (512, 128), packed=False)
    assert model.breakdown(wide).t_mem == pytest.approx(model.breakdown(unpacked).t_mem / 2, rel=0.05)


def test_small_rows_are_not_strided() -> None:
    space = IterSpace.from_workload(matmul_workload(256, 64, 256))  # rows of B: 256 bytes
    model = PerfModel(space, ZEN4_1T)
    s = canonical(space, EtirState((4, 64), (4, 64), (64, 64), (256,), 1, 16, 4, 1, ("B",)))
    assert model.predict(replace(s, pack=())) < 1.5 * model.predict(s)


def test_guards_on_the_vector_axis_cost_more() -> None:
    space, model = gmm4()
    dividing = model.predict(gemm_state(space, (4, 16), (256, 128)))
    ragged_rows = model.predict(gemm_state(space, (4, 16), (260, 128)))
    ragged_vector = model.predict(gemm_state(space, (4, 48), (256, 96)))
    assert dividing < ragged_rows < ragged_vector
    assert ragged_vector > 2.5 * dividing


def test_fused_loops_charge_broadcasts_indexed_by_a_floormod() -> None:
    x = te.placeholder((1, 28, 28, 64), name="x")
    w = te.placeholder((1, 1, 64, 64), name="w")
    rc = te.reduce_axis(64, "rc")
    y = te.compute((1, 28, 28, 64), lambda n, h, ww, co: te.sum(x[n, h, ww, rc] * w[0, 0, rc, co], axis=rc), name="y")
    space = IterSpace.from_workload(tg.Workload([x, w], [y]))
    model = PerfModel(space, ZEN4_1T)
    s = canonical(space, EtirState((1, 1, 8, 16), (1, 1, 8, 16), (1, 4, 8, 64), (64,), 3, 16, 4, 1, ()))
    fused = replace(s, parallel=2)
    assert canonical(space, fused) == fused
    # x[h, w, rc] is a broadcast indexed by w, the second fused loop: its floormod stays in the kernel
    assert model.predict(fused) > 2 * model.predict(s)


def test_packed_gemm_with_fused_loops_is_not_charged() -> None:
    space, model = gmm4()
    s = gemm_state(space, (4, 64), (64, 128), parallel=1)
    assert model.predict(replace(s, parallel=2)) == pytest.approx(model.predict(s), rel=0.05)


def _dep2() -> tuple[IterSpace, PerfModel]:
    from tilegraph import workloads

    space = IterSpace.from_workload(workloads.get("DEP-2"))
    return space, PerfModel(space, ZEN4_1T)


def _dep_state(reg: tuple[int, ...], l2: tuple[int, ...], parallel: int = 1) -> EtirState:
    return EtirState(reg, reg, l2, (3, 3), 3, 16, 1, parallel, ())


def test_depthwise_tiles_along_columns_touch_fewer_far_rows() -> None:
    """A 14-output-row register tile of DEP-2 (stride 2) reads 29 input rows 28 KiB apart; a
    14-column tile reads 3. Measured on AVX2 and AVX-512: the column tiles run 1.3-1.9x faster."""
    from tilegraph.tune.gensor.perf_model import far_rows

    space, model = _dep2()
    x = next(o for o in space.operands if o.name == "x")
    assert far_rows(x, (1, 14, 1, 32, 3, 3)) == 29 and far_rows(x, (1, 1, 14, 32, 3, 3)) == 3
    rows = canonical(space, _dep_state((1, 14, 1, 32), (1, 28, 8, 64)))
    columns = canonical(space, _dep_state((1, 1, 14, 32), (1, 4, 28, 64)))
    assert model.predict(columns) < model.predict(rows)


def test_depthwise_loads_behind_fused_parallel_loops_are_charged() -> None:
    """Three fused parallel loops put a floordiv/floormod into every guarded vector load (3.3x
    slower measured on DEP-2)."""
    space, model = _dep2()
    one = canonical(space, _dep_state((1, 1, 14, 32), (1, 8, 28, 32), parallel=1))
    fused = canonical(space, replace(one, parallel=3))
    assert model.predict(fused) > 2 * model.predict(one)


def test_dot_steps_price_interleaving_unpacked_rows() -> None:
    """With a dot-product step (dot_group 4: vpdpbusd) an int8 B read as rows is interleaved at every
    step: the unpacked state costs more than the one packed in the step's quads; without steps
    (dot_group 0) the model is as before."""
    a = te.placeholder((256, 256), "uint8", name="A")
    b = te.placeholder((256, 256), "int8", name="B")
    space = IterSpace.from_workload(tg.Workload([a, b], [tg.ops.matmul(a, b, accumulate="int32")]))
    model = PerfModel(space, ZEN4_1T)
    packed = canonical(space, EtirState((6, 32), (6, 32), (64, 64), (256,), 1, 16, 4, 1, ("B",), 4))
    unpacked = replace(packed, pack=())
    assert model.micro_kernel(unpacked)[1] > model.micro_kernel(packed)[1]
    plain = replace(packed, dot_group=0)
    assert model.micro_kernel(replace(plain, pack=()))[1] == model.micro_kernel(plain)[1]


# The AVX2 machine of 2026-11-28 (AMD Zen 3, 2 cores) as its probe measured it: L3 read as fast as
# L2, so a packed stream from L3 at PACKED_STREAM_SPEEDUP x L3 looked faster than one from L2.
ZEN3_2T = HardwareModel(
    isa="avx2", cores=2, simd_lanes_fp32=8, fma_units=2, fma_latency_cycles=4, vector_registers=16,
    l1d_bytes=32768, l2_bytes=524288, l3_bytes=16777216, peak_flops_1t=94.2e9, peak_flops_all=160.9e9,
    bandwidth_bytes={"dram": 16.8e9, "l1": 87.9e9, "l2": 95.2e9, "l3": 111.8e9}, measured=True,
    fingerprint="test-zen3",
)


def test_a_packed_block_that_spills_l2_never_costs_less_than_one_that_fits() -> None:
    # BERT's 128x768 . 768x3072 on Zen 3: Gensor picked 384-column blocks (a 1.18 MB packed panel,
    # 2.3x the L2) over 96-column ones (295 KB); alone, the 96-column kernels ran 1.2-1.6x faster
    space = IterSpace.from_workload(matmul_workload(128, 3072, 768))  # (m, n, k)
    model = PerfModel(space, ZEN3_2T)

    def state(columns: int) -> EtirState:
        return canonical(space, EtirState((4, 24), (4, 24), (4, columns), (768,), 1, 8, 8, 1, ("B",)))

    spills, fits = model.breakdown(state(384)), model.breakdown(state(96))
    assert spills.footprint[2] > ZEN3_2T.l2_bytes > fits.footprint[2]
    assert spills.t_mem >= fits.t_mem
    # the spilled stream still passes through L2: at least its bytes at L2's bandwidth
    assert spills.t_mem >= spills.traffic[1] / ZEN3_2T.bandwidth("l2", 2) > 0
