"""graph/fusion/measure.py's roofline: an estimate from below of a candidate's time, which BLP
prunes candidates by. It must stay below what the target's dot-product instructions reach with
narrow operands, or the candidates that use them are pruned before they are measured."""

import dataclasses

import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.graph.fusion.measure import dot_speedup, roofline_seconds
from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS
from tilegraph.tune.hardware import hardware_model

AVX512 = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
    COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:]))
WITH_DOTS = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512bf16", "-mavx512vnni"))
WITH_TILES = dataclasses.replace(WITH_DOTS, cflags=(*WITH_DOTS.cflags, "-mamx-tile", "-mamx-bf16", "-mamx-int8"))


def _matmul(a_dtype: str, b_dtype: str, accumulate: str | None) -> tg.Workload:
    a = te.placeholder((128, 768), a_dtype, name="A")
    b = te.placeholder((768, 3072), b_dtype, name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate=accumulate)])


@pytest.mark.parametrize("a_dtype, b_dtype, accumulate, speedup, tiles", [
    ("float32", "float32", None, 1.0, 1.0), ("bfloat16", "bfloat16", "float32", 2.0, 16.0),
    ("uint8", "int8", "int32", 4.0, 32.0)])
def test_narrow_products_are_priced_at_their_dot_instructions_peak(a_dtype, b_dtype, accumulate, speedup, tiles):
    wl = _matmul(a_dtype, b_dtype, accumulate)
    assert dot_speedup(wl, WITH_DOTS) == speedup
    assert dot_speedup(wl, WITH_TILES) == tiles  # AMX: tdpbf16ps 16x, tdpbusd 32x two AVX-512 FMAs
    assert dot_speedup(wl, AVX512) == 1.0  # no instruction: the float32 peak
    assert dot_speedup(wl, None) == tiles  # unknown target: the best any reaches
    # AVX2's 8-bit steps (vpmaddwd: 16 multiply-adds a ymm instruction) may pass the FMA peak too
    assert dot_speedup(wl, tg.Target.from_string("cpu -isa=avx2 -arch=x86_64")) == (2.0 if a_dtype == "uint8" else 1.0)
    hw = hardware_model(AVX512, measure=False)  # nominal peaks: nothing of this machine measured
    plain, with_dots = roofline_seconds(wl, hw, 2, AVX512), roofline_seconds(wl, hw, 2, WITH_DOTS)
    # 0.6 GFLOP against 2-4 MB: compute-bound on any CPU, so the instruction's rate shows
    assert with_dots < plain if speedup > 1 else with_dots == plain
