"""pair_bf16_products: the register updates of a bfloat16 GEMM become AVX512_BF16 dot-product steps
on targets that have the instruction, and nowhere else; the paired IR means what the unpaired one
does (the interpreter runs both), and the C helper agrees on the hardware and in its fallback."""

import dataclasses

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.graph.construct import construct_one
from tilegraph.loop.interpret import interpret
from tilegraph.lower.passes.pair_bf16_products import DOT2
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS, has_bf16_dot
from tilegraph.te.expr import Call
from tilegraph.te.visit import walk

ml_dtypes = pytest.importorskip("ml_dtypes")
# explicit flags, whatever this machine is (on an AVX-512 host "-isa=avx512" alone means -march=native)
AVX512 = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
    COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:]))
AVX512_BF16 = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512bf16"))
AVX2 = tg.Target.from_string("cpu -isa=avx2")
HOST_HAS_BF16 = has_bf16_dot(tg.Target("cpu"))


def _matmul(m: int, n: int, k: int, dtype: str = "bfloat16") -> tg.Workload:
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((k, n), dtype, name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate="float32")])


def _dot_steps(func) -> int:  # noqa: ANN001
    from tilegraph.loop.visit import stmt_exprs, walk_stmts

    return sum(1 for s in walk_stmts(func.body) for e in stmt_exprs(s) for x in walk(e)
               if isinstance(x, Call) and x.name == DOT2)


def _schedule(wl: tg.Workload, target: tg.Target) -> tg.Schedule:
    trace = construct_one(wl, target)
    assert trace is not None
    return tg.Schedule.replay(wl, trace)


def _inputs(m: int, n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return (rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16))


def test_only_targets_with_the_instruction_pair_products():
    assert has_bf16_dot(AVX512_BF16) and not has_bf16_dot(AVX512) and not has_bf16_dot(AVX2)
    assert not has_bf16_dot(tg.Target("opencl"))
    wl = _matmul(24, 64, 32)
    sch = _schedule(wl, AVX512_BF16)
    assert _dot_steps(lower(sch.func, AVX512_BF16)) > 0
    assert _dot_steps(lower(sch.func, AVX512)) == 0
    assert _dot_steps(lower(_schedule(_matmul(24, 64, 32, "float32"), AVX512_BF16).func, AVX512_BF16)) == 0


@pytest.mark.parametrize("m, n, k", [(24, 64, 32), (7, 48, 9)])  # K odd: a loop unrolled in pairs, and a tail
def test_paired_ir_means_the_unpaired_products(m, n, k, rng):
    """The interpreter runs the lowered IR with its dot-product steps: the float32 accumulation
    within rounding of the unpaired schedule's, and of float64 on the (exact) bfloat16 inputs."""
    wl = _matmul(m, n, k)
    sch = _schedule(wl, AVX512_BF16)
    lowered = lower(sch.func, AVX512_BF16)
    assert _dot_steps(lowered) > 0
    a, b = _inputs(m, n, k, rng)
    paired = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1).reshape(m, n)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(paired, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(paired, interpret(sch, a, b), rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.needs_cc
@pytest.mark.parametrize("hardware", [False, True])
def test_the_c_helper_agrees_in_its_fallback_and_on_the_hardware(hardware, rng):
    """The same paired IR compiled without the extension (its float fallback, any x86 AVX-512 or
    not) and with it (only where this machine has AVX512_BF16)."""
    if hardware and not HOST_HAS_BF16:
        pytest.skip("this machine has no AVX512_BF16")
    host = tg.Target("cpu")
    if not hardware and not (host.arch == "x86_64" and host.isa == "avx512"):
        pytest.skip("the fallback is compiled for AVX-512 here (AVX512_BF16 machines are AVX-512 ones)")
    m, n, k = 30, 80, 37
    wl = _matmul(m, n, k)
    lowered = lower(_schedule(wl, AVX512_BF16).func, AVX512_BF16)
    src = codegen_c(lowered)
    assert "tgh_bf16_dot2_v16sf(" in src.code
    build_target = host if hardware else dataclasses.replace(host, cflags=AVX512.cflags)
    lib = compile_c(src.code, build_target, name=src.entry)
    kernel = Kernel(lib, src.entry, inputs=lowered.params[:2], outputs=lowered.params[2:], source=src.code,
                    target=host, lowered=lowered)
    a, b = _inputs(m, n, k, rng)
    out = np.full(m * n, np.nan, np.float32)
    kernel(a.reshape(-1), b.reshape(-1), out=out)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out.reshape(m, n), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
