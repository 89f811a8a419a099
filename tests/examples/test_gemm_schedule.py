"""The hand-written GEMM example: its register tile fits each ISA's registers, and its kernel is
right on odd shapes for every x86 ISA this host runs (compiled only for the others)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.target import host_arch, host_supports

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from gemm_schedule import gemm_schedule, register_tile  # noqa: E402


@pytest.mark.parametrize("isa, tile", [("avx2", (6, 16)), ("avx512", (6, 64))])
def test_the_register_tile_fits_the_registers(isa, tile):
    target = tg.Target("cpu", arch="x86_64", isa=isa)
    mr, nr = register_tile(target)
    vectors = nr // target.lanes("float32")
    assert (mr, nr) == tile and mr * vectors + vectors + 1 <= (16 if isa == "avx2" else 32)


@pytest.mark.needs_cc
@pytest.mark.skipif(host_arch() != "x86_64", reason="x86 ISAs")
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("m, n, k", [(37, 128, 29), (13, 40, 7)])
def test_the_example_kernel_matches_numpy(isa, m, n, k):
    target = tg.Target("cpu", isa=isa)
    sch = gemm_schedule(m, n, k, target=target)
    if not host_supports(target):  # tg.build refuses a kernel this host cannot run: compile it only
        from tests.foreign_isa import compile_only

        entry, library = compile_only(sch, target)
        assert entry == "tg_matmul" and library.exists()
        pytest.skip(f"this host cannot run {isa} (compiled only)")
    kernel = tg.build(sch, target=target)
    rng = np.random.default_rng(m)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    c = np.full((m, n), np.nan, np.float32)
    kernel(a, b, out=(c,))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
