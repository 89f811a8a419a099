"""Dot-product steps reading a copy packed in K groups (tune/gensor/to_trace.py packed_layout):
vpdpbusd's quads and AVX2's pairs for uint8 x int8, vdpbf16ps's pairs for bfloat16. The packed
copy's loads group into steps that read each lane's group with one load; the grouped IR means the
unpacked products (the interpreter runs both), and the C helpers agree with the interpreter bit for
bit (int8) or within float32 rounding (bfloat16), on the hardware and in their fallbacks."""

import dataclasses

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.graph.construct import construct_one
from tilegraph.loop.interpret import interpret
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.lower.passes.dot_groups import grouped_layout
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS, dot_group, has_bf16_dot, has_int8_dot
from tilegraph.te.buffer import Buffer
from tilegraph.te.expr import BufferLoad, Call, Const, Ramp
from tilegraph.te.visit import walk

AVX512 = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
    COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:]))
AVX512_VNNI = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512vnni"))
AVX512_BF16 = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512bf16"))
AVX2 = tg.Target.from_string("cpu -isa=avx2")
HOST = tg.Target("cpu")
X86 = HOST.arch == "x86_64" and HOST.isa in ("avx2", "avx512")


def _matmul(m: int, n: int, k: int, a_dtype: str, b_dtype: str, accumulate: str) -> tg.Workload:
    a = te.placeholder((m, k), a_dtype, name="A")
    b = te.placeholder((k, n), b_dtype, name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate=accumulate)])


def _packed(wl: tg.Workload, group: int, lanes: int) -> tg.Schedule:
    """A register tile of 3 rows (a guarded tail: m is odd) x 2 vectors, the reduction split by 8
    and unrolled, B copied per column panel in K groups of `group`."""
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("matmul")
    io, ii = sch.split(i, [None, 3])
    jo, jt, jv = sch.split(j, [None, 2, lanes])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(jo, io, ko, ki, ii, jt, jv)
    sch.unroll(ki)
    sch.unroll(ii)
    sch.unroll(jt)
    sch.vectorize(jv)
    wb = sch.cache_write("matmul", "local")
    sch.reverse_compute_at(wb, io)
    rows, cols = sch.loops(wb)[-2:]
    cols_outer, cols_inner = sch.split(cols, [None, lanes])
    sch.vectorize(cols_inner)
    sch.unroll(cols_outer)
    sch.unroll(rows)  # the accumulators touched as whole vectors: registers (promote_registers)
    copy = sch.cache_read("matmul", "B", "global", layout={"split": [[0, group]], "order": [0, 2, 1]})
    sch.compute_at(copy, jo)
    return sch


def _steps(func, name: str) -> list[Call]:  # noqa: ANN001
    return [x for s in walk_stmts(func.body) for e in stmt_exprs(s) for x in walk(e)
            if isinstance(x, Call) and x.name == name]


def _exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    total = a.astype(np.int64) @ b.astype(np.int64)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def _int8_inputs(m: int, n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, 256, (m, k)).astype(np.uint8), rng.integers(-128, 128, (k, n)).astype(np.int8)


def _run(lowered, code: str, entry: str, build: tg.Target, *arrays: np.ndarray, out: np.ndarray) -> np.ndarray:  # noqa: ANN001
    kernel = Kernel(compile_c(code, build, name=entry), entry, inputs=lowered.params[:2],
                    outputs=lowered.params[2:], source=code, target=HOST, lowered=lowered)
    kernel(*(x.reshape(-1) for x in arrays), out=out)
    return out


def test_the_targets_group_sizes():
    assert (dot_group(AVX512_VNNI, "int8"), dot_group(AVX2, "int8"), dot_group(AVX512, "int8")) == (4, 2, 0)
    assert (dot_group(AVX512_BF16, "bfloat16"), dot_group(AVX512, "bfloat16"), dot_group(AVX2, "bfloat16")) == (2, 0, 0)
    assert dot_group(AVX512_VNNI, "float32") == 0 and dot_group(tg.Target("opencl"), "int8") == 0


def test_grouped_layout_takes_rows_whole_groups_and_pairs_only():
    buf = Buffer("B", (4096,), tg.dtype.int8)

    def loads(*starts: int, stride: int) -> tuple[BufferLoad, ...]:
        return tuple(BufferLoad(buf, (Ramp(Const(s, tg.dtype.int32), stride, 16),)) for s in starts)

    assert grouped_layout(loads(0, 512, 1024, 1536, stride=1), 4) == 1           # rows, any bases
    assert grouped_layout(loads(64, 65, 66, 67, stride=4), 4) == 4                # one quad per lane
    assert grouped_layout(loads(64, 65, 96, 97, stride=2), 4) == 2                # two pairs per lane
    assert grouped_layout(loads(64, 66, 65, 67, stride=4), 4) is None             # quads out of order
    assert grouped_layout(loads(64, 66, 96, 98, stride=2), 4) is None             # no pair together
    assert grouped_layout((*loads(0, 1, stride=2), *loads(2, 3, stride=4)), 4) is None  # mixed strides
    assert grouped_layout(loads(67, 66, 65, 64, stride=-4), 4) is None           # descending lanes


@pytest.mark.parametrize("target, group, lanes", [(AVX512_VNNI, 4, 16), (AVX2, 2, 8)], ids=["quads", "pairs"])
@pytest.mark.parametrize("m, n, k", [(7, 64, 16), (5, 96, 40)])
def test_int8_steps_read_the_packed_copy_and_mean_the_products(target, group, lanes, m, n, k, rng):
    wl = _matmul(m, n if lanes == 16 else n // 2, k, "uint8", "int8", "int32")
    n = wl.outputs[0].shape[1]
    sch = _packed(wl, group, lanes)
    lowered = lower(sch.func, target)
    steps = _steps(lowered, "u8s8_dot4")
    assert steps and all(grouped_layout(tuple(s.args[5:]), 4) == group for s in steps)  # every step reads groups
    a, b = _int8_inputs(m, n, k, rng)
    got = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1).reshape(m, n)
    np.testing.assert_array_equal(got, _exact(a, b))
    np.testing.assert_array_equal(got, interpret(sch, a, b))


@pytest.mark.needs_cc
@pytest.mark.parametrize("hardware", [False, True], ids=["fallback", "hardware"])
@pytest.mark.parametrize("target, group, lanes", [(AVX512_VNNI, 4, 16), (AVX2, 2, 8)], ids=["quads", "pairs"])
def test_int8_packed_helpers_agree_bit_for_bit_and_wrap(target, group, lanes, hardware, rng):
    """Odd rows, the 255 x -128 extremes and sums past 2**31, in C as in the interpreter."""
    if not X86:
        pytest.skip("x86 code")
    if hardware and group == 4 and not has_int8_dot(HOST):
        pytest.skip("this machine has no AVX512_VNNI")
    if not hardware and HOST.isa != "avx512":
        pytest.skip("the fallbacks are compiled for AVX-512 without VNNI here")
    # the hardware path: the target's own flags; the fallback: AVX-512 without VNNI, whose
    # compiler sees neither VNNI nor an 8-lane AVX2 step (the pairs' 16-lane form has none)
    build = (target if group == 2 else HOST) if hardware else AVX512
    for m, k, extreme in ((7, 24, False), (3, 70000, True)):
        wl = _matmul(m, 2 * lanes * (2 if group == 4 else 1), k, "uint8", "int8", "int32")
        n = wl.outputs[0].shape[1]
        lowered = lower(_packed(wl, group, lanes).func, target)
        src = codegen_c(lowered)
        helper = "tgh_u8s8_dot4q_v16si(" if group == 4 else "tgh_u8s8_dot4p_v8si("
        assert helper in src.code
        a, b = _int8_inputs(m, n, k, rng)
        if extreme:
            a[:] = 255
            b[:] = 127
            b[:, 1] = -128
        out = _run(lowered, src.code, src.entry, build, a, b, out=np.full(m * n, -12345, np.int32))  # poisoned
        np.testing.assert_array_equal(out.reshape(m, n), _exact(a, b))
        if extreme:
            assert out[0] < 0 < out[1]  # wrapped both ways


@pytest.mark.needs_cc
@pytest.mark.parametrize("hardware", [False, True], ids=["fallback", "hardware"])
def test_bfloat16_pairs_step_agrees_with_the_interpreter(hardware, rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if hardware and not has_bf16_dot(HOST):
        pytest.skip("this machine has no AVX512_BF16")
    if not hardware and HOST.isa != "avx512":
        pytest.skip("the fallback is compiled for AVX-512 here")
    m, n, k = 7, 64, 40
    wl = _matmul(m, n, k, "bfloat16", "bfloat16", "float32")
    sch = _packed(wl, 2, 16)
    lowered = lower(sch.func, AVX512_BF16)
    steps = _steps(lowered, "bf16_dot2")
    assert steps and all(grouped_layout(tuple(s.args[3:]), 2) == 2 for s in steps)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    want = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1).reshape(m, n)
    np.testing.assert_allclose(want, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    src = codegen_c(lowered)
    assert "tgh_bf16_dot2p_v16sf(" in src.code
    out = _run(lowered, src.code, src.entry, HOST if hardware else AVX512, a.view(np.uint16), b.view(np.uint16),
               out=np.full(m * n, np.nan, np.float32))  # poisoned
    np.testing.assert_allclose(out.reshape(m, n), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target, group", [(AVX512_VNNI, 4), (AVX2, 2)], ids=["vnni", "avx2"])
def test_gensor_packs_int8_weights_in_the_targets_groups(target, group, rng):
    """Gensor's construction copies a packed int8 B in the target's K groups, and its steps read them."""
    m, n, k = 196, 512, 256
    wl = _matmul(m, n, k, "uint8", "int8", "int32")
    trace = construct_one(wl, target)
    assert trace is not None
    sch = tg.Schedule.replay(wl, trace)
    layouts = [i.inputs.get("layout") for i in sch.trace.instructions if i.kind == "cache_read" and i.inputs["buffer"] == "B"]
    if not layouts:
        pytest.skip("Gensor's pick does not pack B for this target")  # its choice, not asserted
    assert layouts[0]["split"] == [[0, group]]
    lowered = lower(sch.func, target)
    assert _steps(lowered, "u8s8_dot4")
    a, b = _int8_inputs(m, n, k, rng)
    np.testing.assert_array_equal(interpret(sch, a, b), _exact(a, b))
