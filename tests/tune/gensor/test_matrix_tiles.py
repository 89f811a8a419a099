"""Matrix states (tune/gensor/matrix_tiles.py): which workloads have them, that every state fits
the tile registers and divides its axes, that they lower to one tile product on an AMX target, and
that Gensor proposes them there and only there (vector states where they would not lower)."""

import dataclasses
import math

import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.loop.ir import TileProduct
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.use_matrix_tiles import a_registers
from tilegraph.lower.pipeline import lower
from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS
from tilegraph.tune.gensor.matrix_tiles import matrix_kind, matrix_shape, matrix_states, predict_matrix
from tilegraph.tune.gensor.state import EtirState, IterSpace
from tilegraph.tune.gensor.to_trace import state_to_schedule
from tilegraph.tune.strategy import gensor as gensor_strategy
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy

AVX512 = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
    COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:]))
AMX = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512bf16", "-mavx512vnni", "-mamx-tile",
                                          "-mamx-bf16", "-mamx-int8"))


def _matmul(m: int, n: int, k: int, a_dtype: str = "bfloat16", b_dtype: str = "bfloat16",
            acc: str = "float32") -> tg.Workload:
    a = te.placeholder((m, k), a_dtype, name="A")
    b = te.placeholder((k, n), b_dtype, name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate=acc)])


def _conv(h: int, c: int, co: int, kernel: int, dtype: str = "bfloat16", acc: str = "float32") -> tg.Workload:
    x = te.placeholder((1, h, h, c), "uint8" if acc == "int32" else dtype, name="x")
    w = te.placeholder((kernel, kernel, c, co), "int8" if acc == "int32" else dtype, name="w")
    return tg.Workload([x, w], [ops.conv2d_nhwc(x, w, padding=kernel // 2, accumulate=acc)])


def _batched(b: int, m: int, n: int, k: int) -> tg.Workload:
    p = te.placeholder((b, m, k), "bfloat16", name="P")
    v = te.placeholder((b, k, n), "bfloat16", name="V")
    return tg.Workload([p, v], [ops.matmul_nd(p, v, accumulate="float32")])


def _tile_products(func) -> list[TileProduct]:  # noqa: ANN001
    return [s for s in walk_stmts(func.body) if isinstance(s, TileProduct)]


def test_which_workloads_have_matrix_states():
    assert matrix_kind(IterSpace.from_workload(_matmul(64, 64, 64)), AMX) == "bfloat16"
    assert matrix_kind(IterSpace.from_workload(_matmul(64, 64, 64, "uint8", "int8", "int32")), AMX) == "int8"
    assert matrix_kind(IterSpace.from_workload(_matmul(64, 64, 64)), AVX512) is None
    assert matrix_kind(IterSpace.from_workload(_matmul(64, 64, 64, "float32", "float32", None)), AMX) is None
    assert matrix_shape(IterSpace.from_workload(_matmul(64, 40, 64)), "bfloat16") is None  # 40 columns: no 16-wide tile
    assert matrix_shape(IterSpace.from_workload(_matmul(64, 64, 3 * 17)), "bfloat16") is None  # K not in whole pairs
    batched = matrix_shape(IterSpace.from_workload(_batched(4, 32, 32, 64)), "bfloat16")
    assert batched is not None and batched.rows == (1,)  # the batch indexes b: never a row of the tile


@pytest.mark.parametrize("workload", [_matmul(96, 64, 256), _conv(14, 64, 64, 3), _batched(3, 48, 32, 64),
                                      _conv(7, 128, 64, 1, acc="int32"), _matmul(20, 48, 512, "uint8", "int8", "int32")],
                         ids=["gemm", "conv3x3", "batched", "int8-conv1x1", "int8-gemm"])
def test_every_state_fits_the_tiles_and_divides_and_the_best_lower_to_one_tile_product(workload, hw):
    space = IterSpace.from_workload(workload)
    kind = matrix_kind(space, AMX)
    states = matrix_states(space, hw, kind)
    assert states
    shape = matrix_shape(space, kind)
    for s in states:
        assert s.matrix and s.unroll == s.dot_group == shape.group and s.pack == (shape.b,)
        assert all(e % r == 0 and e % l2 == 0 and l2 % r == 0 for e, r, l2 in zip(space.spatial, s.reg, s.l2))
    predicted = [predict_matrix(space, hw, s).seconds for s in states]
    assert predicted == sorted(predicted)
    for s in states[:6]:  # (lowering them all would take seconds; their register tiles differ little)
        (tile,) = _tile_products(lower(state_to_schedule(workload, space, s).func, AMX))
        assert tile.rows == math.prod(s.reg[a] for a in shape.rows) and tile.cols == s.reg[space.vec_axis]
        assert a_registers(tuple(r for r, _ in tile.a_tiles), -(-tile.cols // 16)) is not None  # fits 8 tiles


def test_larger_tiles_are_predicted_faster(hw):
    space = IterSpace.from_workload(_matmul(128, 256, 768))
    small = EtirState((16, 16), (16, 16), (128, 128), (768,), 1, 16, 2, 1, ("B",), 2, True)
    large = dataclasses.replace(small, reg=(32, 32), l1=(32, 32))
    assert predict_matrix(space, hw, large).seconds < predict_matrix(space, hw, small).seconds


def _propose(workload: tg.Workload, target: tg.Target) -> list:
    return GensorStrategy(top_k=2).propose(TuneContext(workload, target, 0, None, trials_left=2), 2)


def test_gensor_proposes_matrix_states_where_they_lower_and_vector_states_elsewhere(monkeypatch):
    wl = _matmul(64, 64, 256)
    assert all(c.meta["state"].get("matrix") for c in _propose(wl, AMX))
    assert not any(c.meta["state"].get("matrix") for c in _propose(wl, AVX512))
    # where the matrix states would not lower to tile products, the vector states are proposed
    monkeypatch.setattr(gensor_strategy, "makes_tile_products", lambda func, target: False)
    fallback = _propose(wl, AMX)
    assert fallback and not any(c.meta["state"].get("matrix") for c in fallback)
