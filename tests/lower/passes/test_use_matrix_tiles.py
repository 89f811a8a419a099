"""use_matrix_tiles: a register tile's reduction nest becomes one TileProduct where the target has
matrix tiles (AMX), and nowhere else. The lowered IR means the products (the interpreter runs the
TileProduct against float64 / exact integer references on odd shapes: row tails, several steps,
two row loops, a convolution's taps), and where this machine has AMX the C code agrees with the
interpreter (bit for bit on integers, within float32 rounding of the sum on bfloat16), outputs
poisoned first."""

import dataclasses

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import TileProduct
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.use_matrix_tiles import a_registers, makes_tile_products
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS, has_matrix_tiles

AVX512 = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
    COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:]))
AMX = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512bf16", "-mavx512vnni", "-mamx-tile",
                                          "-mamx-bf16", "-mamx-int8"))
HOST = tg.Target("cpu")
KINDS = {"bfloat16": ("bfloat16", "bfloat16", "float32", 2), "int8": ("uint8", "int8", "int32", 4)}


def _matmul(m: int, n: int, k: int, kind: str) -> tg.Workload:
    a_dtype, b_dtype, acc, _ = KINDS[kind]
    a = te.placeholder((m, k), a_dtype, name="A")
    b = te.placeholder((k, n), b_dtype, name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate=acc)])


def _tiled(wl: tg.Workload, rows: int, cols: int, group: int, k_rows: int = 16) -> tg.Schedule:
    """Register tiles of `rows` x `cols` over the whole reduction, the reduction split in steps of
    `k_rows` K groups of `group`, B packed in those groups: the nest use_matrix_tiles takes."""
    sch = tg.Schedule(wl)
    i, j, k = sch.loops(wl.outputs[0].name)
    io, ii = sch.split(i, [None, rows])
    jo, jt, jv = sch.split(j, [None, cols // 16, 16])
    ko, kt, kg = sch.split(k, [None, k_rows, group])
    sch.reorder(io, jo, ko, kt, kg, ii, jt, jv)
    sch.parallel(io)
    wb = sch.cache_write(wl.outputs[0].name, "local")
    sch.reverse_compute_at(wb, jo)
    copy = sch.cache_read(wl.outputs[0].name, "B", "global", layout={"split": [[0, group]], "order": [0, 2, 1]})
    sch.compute_at(copy, io)
    return sch


def _inputs(wl: tg.Workload, kind: str, rng: np.random.Generator) -> list[np.ndarray]:
    if kind == "int8":
        return [rng.integers(0, 256, wl.inputs[0].shape).astype(np.uint8),
                rng.integers(-128, 128, wl.inputs[1].shape).astype(np.int8)]
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return [rng.standard_normal(t.shape).astype(ml_dtypes.bfloat16) for t in wl.inputs]


def _tile_products(func) -> list[TileProduct]:  # noqa: ANN001
    return [s for s in walk_stmts(func.body) if isinstance(s, TileProduct)]


def _check(got: np.ndarray, want: np.ndarray, kind: str) -> None:
    if kind == "int8":
        np.testing.assert_array_equal(got, ((want.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", ["bfloat16", "int8"])
@pytest.mark.parametrize("m, n, k, rows, cols", [(24, 64, 128, 24, 32), (64, 48, 320, 16, 48), (5, 16, 64, 5, 16)],
                         ids=["row-tail", "three-column-tiles", "tiny"])
def test_a_register_tile_becomes_one_tile_product_that_means_the_products(kind, m, n, k, rows, cols, rng):
    group = KINDS[kind][3]
    wl = _matmul(m, n, k, kind)
    sch = _tiled(wl, rows, cols, group, k_rows=min(16, k // group))
    lowered = lower(sch.func, AMX)
    (tile,) = _tile_products(lowered)
    assert tile.rows == rows and tile.cols == cols and tile.group == group
    assert tile.zero  # the accumulators' zeroing right before it is folded in (tilezero)
    assert [r for r, _ in tile.a_tiles] == [min(16, rows - t) for t in range(0, rows, 16)]
    a, b = _inputs(wl, kind, rng)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1).reshape(m, n)
    _check(got, want, kind)


@pytest.mark.parametrize("kind", ["bfloat16", "int8"])
def test_a_convolution_takes_two_row_loops_and_its_taps_as_steps(kind, rng):
    """Output rows h (2 per tile) and columns w (7): two row tiles whose a rows start an input row
    apart; the 3 x 3 taps and the channel blocks are the steps."""
    a_dtype, b_dtype, acc, group = KINDS[kind]
    x = te.placeholder((1, 6, 7, 2 * 64), a_dtype, name="x")
    w = te.placeholder((3, 3, 2 * 64, 32), b_dtype, name="w")
    wl = tg.Workload([x, w], [ops.conv2d_nhwc(x, w, padding=1, accumulate=acc)])
    from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
    from tilegraph.tune.gensor.to_trace import state_to_schedule

    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((1, 2, 7, 32), (1, 2, 7, 32), (1, 6, 7, 32), space.reduce, 3, 16, group, 1,
                                       ("w",), group, True))
    sch = state_to_schedule(wl, space, state)
    lowered = lower(sch.func, AMX)
    (tile,) = _tile_products(lowered)
    assert [r for r, _ in tile.a_tiles] == [7, 7] and tile.a_tiles[1][1] - tile.a_tiles[0][1] == 9 * 128
    assert [e for e, _, _ in tile.steps][:2] == [3, 3]
    inputs = _inputs(wl, kind, rng)
    want = interpret(wl, *inputs)
    got = interpret(lowered, *(t.reshape(-1) for t in inputs), outputs=1).reshape(want.shape)
    _check(got, want.astype(np.float64), kind)


def test_rows_that_run_on_in_a_are_tiled_as_one_run():
    """A 1x1 convolution's output rows and columns: x[h, w] is one row of channels after another,
    so 2 rows of 7 columns are one run of 14 rows (one tile), not two tiles of 7."""
    x = te.placeholder((1, 4, 7, 64), "bfloat16", name="x")
    w = te.placeholder((1, 1, 64, 32), "bfloat16", name="w")
    wl = tg.Workload([x, w], [ops.conv2d_nhwc(x, w, accumulate="float32")])
    from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
    from tilegraph.tune.gensor.to_trace import state_to_schedule

    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((1, 2, 7, 32), (1, 2, 7, 32), (1, 4, 7, 32), space.reduce, 3, 16, 2, 1,
                                       ("w",), 2, True))
    lowered = lower(state_to_schedule(wl, space, state).func, AMX)
    (tile,) = _tile_products(lowered)
    assert tile.a_tiles == ((14, 0),)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(t.shape).astype(ml_dtypes.bfloat16) for t in wl.inputs]
    want = interpret(wl, *inputs)
    got = interpret(lowered, *(t.reshape(-1) for t in inputs), outputs=1).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_registers_share_where_the_tiles_do_not_all_fit():
    assert a_registers((16, 16), 2) == (0, 1)                       # 4 accumulators, 2 + 2 more
    assert a_registers((16, 16, 16, 1), 1) == (0, 2, 0, 1)          # 3 free: one per row count, a spare
    assert a_registers((7, 7, 7, 7), 1) == (0, 1, 2, 0)
    assert a_registers((16, 16, 16), 2) is None                     # 6 accumulators + 2 of b: none left
    assert a_registers((16, 16), 4) is None


@pytest.mark.parametrize("kind", ["bfloat16", "int8"])
def test_a_tall_tile_shares_a_registers_and_means_the_products(kind, rng):
    """49 rows (a 7 x 7 map of a 1x1 convolution, one run) in tiles of 16, 16, 16 and 1 by one
    column tile: four accumulators, a's tiles in three registers; interpreter and (on AMX) C."""
    a_dtype, b_dtype, acc, group = KINDS[kind]
    x = te.placeholder((1, 7, 7, 256), a_dtype, name="x")
    w = te.placeholder((1, 1, 256, 32), b_dtype, name="w")
    wl = tg.Workload([x, w], [ops.conv2d_nhwc(x, w, accumulate=acc)])
    from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
    from tilegraph.tune.gensor.to_trace import state_to_schedule

    space = IterSpace.from_workload(wl)
    state = canonical(space, EtirState((1, 7, 7, 16), (1, 7, 7, 16), (1, 7, 7, 32), space.reduce, 3, 16, group, 1,
                                       ("w",), group, True))
    sch = state_to_schedule(wl, space, state)
    (tile,) = _tile_products(lower(sch.func, AMX))
    assert [r for r, _ in tile.a_tiles] == [16, 16, 16, 1]
    inputs = _inputs(wl, kind, rng)
    want = interpret(wl, *inputs)
    got = interpret(lower(sch.func, AMX), *(t.reshape(-1) for t in inputs), outputs=1).reshape(want.shape)
    _check(got, want.astype(np.float64), kind)
    if has_matrix_tiles(HOST, kind):
        kernel = tg.build(sch, target=HOST)
        assert "_tile_dp" in kernel.source
        _check(kernel(*inputs), got.astype(np.float64), kind)


def test_nothing_changes_without_matrix_tiles_or_outside_the_form():
    wl = _matmul(32, 32, 64, "bfloat16")
    assert not _tile_products(lower(_tiled(wl, 32, 32, 2).func, AVX512))  # no AMX in its flags
    assert not _tile_products(lower(_tiled(wl, 32, 32, 2).func, tg.Target.from_string("cpu -isa=avx2")))
    too_wide = _matmul(32, 64, 64, "bfloat16")  # 2 row tiles x 4 column tiles: 14 tile registers
    assert not _tile_products(lower(_tiled(too_wide, 32, 64, 2).func, AMX))
    ragged = _matmul(30, 32, 64, "bfloat16")  # 16-row tiles over 30 rows: a guarded tail, not a nest
    assert not _tile_products(lower(_tiled(ragged, 16, 32, 2).func, AMX))
    unpacked = tg.Schedule(wl)  # B read in place: no column's K group is contiguous
    i, j, k = unpacked.loops("matmul")
    io, ii = unpacked.split(i, [None, 16])
    ko, kt, kg = unpacked.split(k, [None, 16, 2])
    unpacked.reorder(io, ko, kt, kg, ii, j)
    assert not _tile_products(lower(unpacked.func, AMX))
    assert makes_tile_products(_tiled(wl, 32, 32, 2).func, AMX)
    assert not makes_tile_products(unpacked.func, AMX)


@pytest.mark.needs_cc
@pytest.mark.parametrize("kind", ["bfloat16", "int8"])
def test_the_amx_code_agrees_with_the_interpreter(kind, rng):
    if not has_matrix_tiles(HOST, kind):
        pytest.skip(f"this machine has no AMX for {kind}")
    for m, n, k, rows, cols in ((24, 64, 256, 24, 32), (5, 48, 64 * KINDS[kind][3] // 2, 5, 48)):
        wl = _matmul(m, n, k, kind)
        group = KINDS[kind][3]
        lowered = lower(_tiled(wl, rows, cols, group, k_rows=min(16, k // group)).func, AMX)
        assert _tile_products(lowered)
        src = codegen_c(lowered)
        assert ("_tile_dpbf16ps(" if kind == "bfloat16" else "_tile_dpbusd(") in src.code
        # one configuration, made the thread's where each parallel task starts, not per product
        assert src.code.count("tgh_enter_tiles(&tgh_tiles_0,") == 1 and "_tile_zero(0);" in src.code
        a, b = _inputs(wl, kind, rng)
        if kind == "int8":
            a[:2] = 255  # the extremes: 255 x -128 and sums past what 16 bits hold
            b[:, 0] = -128
        want = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1)
        kernel = Kernel(compile_c(src.code, AMX, name=src.entry), src.entry, inputs=lowered.params[:2],
                        outputs=lowered.params[2:], source=src.code, target=HOST, lowered=lowered)
        poisoned = np.full(m * n, np.nan, np.float32) if kind == "bfloat16" else np.full(m * n, -12345, np.int32)
        got = kernel(a.reshape(-1).view(np.uint16) if kind == "bfloat16" else a.reshape(-1),
                     b.reshape(-1).view(np.uint16) if kind == "bfloat16" else b.reshape(-1), out=poisoned)
        if kind == "int8":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.needs_cc
def test_a_kernel_gives_the_thread_back_the_tile_configuration_it_found(rng):
    """Another library's kernels may keep their tile configuration loaded between calls (ONNX
    Runtime's int8 GEMMs died with SIGILL after ours): after our kernel the thread has the one it
    had, or none where it had none."""
    import ctypes

    if not has_matrix_tiles(HOST, "int8"):
        pytest.skip("this machine has no AMX")
    probe_src = """#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; }
  __attribute__((aligned(64))) cfg_t;
void probe_set(int rows) { cfg_t c; memset(&c, 0, 64); c.palette = 1; c.colsb[0] = 64; c.rows[0] = rows;
  syscall(SYS_arch_prctl, 0x1023, 18); _tile_loadconfig(&c); }
void probe_release(void) { _tile_release(); }
int probe_rows(void) { cfg_t c; _tile_storeconfig(&c); return c.palette ? c.rows[0] : -1; }
"""
    probe = ctypes.CDLL(compile_c(probe_src, AMX, name="probe"))
    wl = _matmul(32, 32, 64, "int8")
    lowered = lower(_tiled(wl, 32, 32, 4, k_rows=16).func, AMX)
    src = codegen_c(lowered)
    kernel = Kernel(compile_c(src.code, AMX, name=src.entry), src.entry, inputs=lowered.params[:2],
                    outputs=lowered.params[2:], source=src.code, target=HOST, lowered=lowered)
    a, b = _inputs(wl, "int8", rng)
    for found in (3, None):
        probe.probe_set(found) if found else probe.probe_release()
        kernel(a.reshape(-1), b.reshape(-1), num_threads=1)  # on this thread
        assert probe.probe_rows() == (found if found else -1)
