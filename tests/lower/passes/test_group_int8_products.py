"""group_int8_products: the register updates of a uint8 x int8 GEMM become AVX512_VNNI dot-product
steps on targets that have the instruction, 8-lane steps from vpmaddwd on AVX2 targets, and
nowhere else; the grouped IR means what the
ungrouped one does, bit for bit (the interpreter runs both), and so does the C helper, on the
hardware and in its fallback, wrapping past 2**31 as int32 arithmetic does."""

import dataclasses
import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.graph.construct import construct_one
from tilegraph.loop.interpret import interpret
from tilegraph.loop.visit import stmt_exprs, walk_stmts
from tilegraph.lower.passes.group_int8_products import DOT4
from tilegraph.lower.pipeline import lower
from tilegraph.runtime.kernel import Kernel
from tilegraph.target import COMMON_CFLAGS, CROSS_ISA_CFLAGS, has_int8_dot, int8_dot_lanes
from tilegraph.te.expr import Call
from tilegraph.te.visit import walk

# explicit flags, whatever this machine is (on an AVX-512 host "-isa=avx512" alone means -march=native)
AVX512 = dataclasses.replace(tg.Target.from_string("cpu -isa=avx512 -arch=x86_64"), cflags=(
    COMMON_CFLAGS[0], *CROSS_ISA_CFLAGS[("x86_64", "avx512")], *COMMON_CFLAGS[1:]))
AVX512_VNNI = dataclasses.replace(AVX512, cflags=(*AVX512.cflags, "-mavx512vnni"))
AVX2 = tg.Target.from_string("cpu -isa=avx2")
HOST_HAS_VNNI = has_int8_dot(tg.Target("cpu"))


def _matmul(m: int, n: int, k: int, a_dtype: str = "uint8") -> tg.Workload:
    a = te.placeholder((m, k), a_dtype, name="A")
    b = te.placeholder((k, n), "int8", name="B")
    return tg.Workload([a, b], [ops.matmul(a, b, accumulate="int32")])


def _dot_steps(func) -> int:  # noqa: ANN001
    return sum(1 for s in walk_stmts(func.body) for e in stmt_exprs(s) for x in walk(e)
               if isinstance(x, Call) and x.name == DOT4)


def _schedule(wl: tg.Workload, target: tg.Target) -> tg.Schedule:
    trace = construct_one(wl, target)
    assert trace is not None
    return tg.Schedule.replay(wl, trace)


def _inputs(m: int, n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, 256, (m, k)).astype(np.uint8), rng.integers(-128, 128, (k, n)).astype(np.int8)


def _exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    total = a.astype(np.int64) @ b.astype(np.int64)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def test_only_targets_with_the_instruction_group_products():
    assert has_int8_dot(AVX512_VNNI) and not has_int8_dot(AVX512) and not has_int8_dot(AVX2)
    assert not has_int8_dot(tg.Target("opencl"))
    assert (int8_dot_lanes(AVX512_VNNI), int8_dot_lanes(AVX2), int8_dot_lanes(AVX512)) == (16, 8, 0)
    assert int8_dot_lanes(tg.Target("opencl")) == 0
    sch = _schedule(_matmul(24, 64, 32), AVX512_VNNI)
    assert _dot_steps(lower(sch.func, AVX512_VNNI)) > 0
    assert _dot_steps(lower(sch.func, AVX512)) == 0
    assert _dot_steps(lower(_schedule(_matmul(24, 64, 32), AVX2).func, AVX2)) > 0  # vpmaddwd's 8 lanes
    assert _dot_steps(lower(_schedule(_matmul(24, 64, 32, "int8"), AVX512_VNNI).func, AVX512_VNNI)) == 0  # s8 x s8


@pytest.mark.parametrize("target", [AVX512_VNNI, AVX2], ids=["vnni", "avx2"])
@pytest.mark.parametrize("m, n, k", [(24, 64, 32), (7, 48, 11), (5, 33, 6)])  # K % 4: 0, 3, 2 (a tail)
def test_grouped_ir_means_the_ungrouped_products_bit_for_bit(m, n, k, target, rng):
    wl = _matmul(m, n, k)
    sch = _schedule(wl, target)
    lowered = lower(sch.func, target)
    a, b = _inputs(m, n, k, rng)
    grouped = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1).reshape(m, n)
    np.testing.assert_array_equal(grouped, _exact(a, b))
    np.testing.assert_array_equal(grouped, interpret(sch, a, b))


def _kernel(wl: tg.Workload, hardware: bool) -> Kernel:
    host = tg.Target("cpu")
    lowered = lower(_schedule(wl, AVX512_VNNI).func, AVX512_VNNI)
    src = codegen_c(lowered)
    assert "tgh_u8s8_dot4" in src.code  # B as rows, or packed in quads (test_packed_dot_layouts.py)
    build_target = host if hardware else dataclasses.replace(host, cflags=AVX512.cflags)
    lib = compile_c(src.code, build_target, name=src.entry)
    return Kernel(lib, src.entry, inputs=lowered.params[:2], outputs=lowered.params[2:], source=src.code,
                  target=host, lowered=lowered)


def _skip_unless_runnable(hardware: bool) -> None:
    host = tg.Target("cpu")
    if hardware and not HOST_HAS_VNNI:
        pytest.skip("this machine has no AVX512_VNNI")
    if not hardware and not (host.arch == "x86_64" and host.isa == "avx512"):
        pytest.skip("the fallback is compiled for AVX-512 here (AVX512_VNNI machines are AVX-512 ones)")


@pytest.mark.needs_cc
@pytest.mark.parametrize("hardware", [False, True])
def test_the_c_helper_agrees_bit_for_bit_in_its_fallback_and_on_the_hardware(hardware, rng):
    _skip_unless_runnable(hardware)
    m, n, k = 30, 80, 37
    kernel = _kernel(_matmul(m, n, k), hardware)
    a, b = _inputs(m, n, k, rng)
    out = np.full(m * n, -12345, np.int32)  # poisoned
    kernel(a.reshape(-1), b.reshape(-1), out=out)
    np.testing.assert_array_equal(out.reshape(m, n), _exact(a, b))


@pytest.mark.needs_cc
@pytest.mark.parametrize("hardware", [False, True])
def test_sums_past_int32_wrap_as_the_interpreter_says(hardware):
    """vpdpbusd does not saturate: 255 * 127 * 70000 > 2**31 wraps, in C as in the interpreter."""
    _skip_unless_runnable(hardware)
    m, n, k = 2, 16, 70000
    kernel = _kernel(_matmul(m, n, k), hardware)
    a = np.full((m, k), 255, np.uint8)
    b = np.full((k, n), 127, np.int8)
    b[:, 1] = -128
    out = np.zeros(m * n, np.int32)
    kernel(a.reshape(-1), b.reshape(-1), out=out)
    np.testing.assert_array_equal(out.reshape(m, n), _exact(a, b))
    assert out[0] < 0 < out[1]  # wrapped both ways


def _guarded_tail_conv() -> tuple[tg.Workload, tg.Schedule]:
    """A 1x1 convolution over 7 rows in a row tile of 2 (a guarded tail) with the reduction split
    and its inner part unrolled: what Gensor constructed for MobileNet-V2's 960 -> 160 projection
    at 7x7, smaller. Unrolled, each iteration leaves a Seq of unguarded updates and a guard of its own."""
    x = te.placeholder((1, 7, 3, 24), "uint8", name="X")
    w = te.placeholder((1, 1, 24, 64), "int8", name="W")
    wl = tg.Workload([x, w], [ops.conv2d_nhwc(x, w, accumulate="int32")])
    trace = {"instructions": [
        {"inputs": {"factors": [2, 2, 2], "loop": "h"}, "kind": "split", "outputs": ["h_0", "h_1", "h_2"]},
        {"inputs": {"factors": [2, 2, 16], "loop": "co"}, "kind": "split", "outputs": ["co_0", "co_1", "co_2"]},
        {"inputs": {"factors": [3, 8], "loop": "rc"}, "kind": "split", "outputs": ["rc_0", "rc_1"]},
        {"inputs": {"loops": ["n", "h_0", "h_1", "co_0", "rh", "rw", "rc_0", "rc_1", "h_2", "w", "co_1", "co_2"]},
         "kind": "reorder", "outputs": []},
        {"inputs": {"loop": "h_0"}, "kind": "parallel", "outputs": []},
        {"inputs": {"loop": "rc_1"}, "kind": "unroll", "outputs": []},
        {"inputs": {"loop": "h_2"}, "kind": "unroll", "outputs": []},
        {"inputs": {"loop": "w"}, "kind": "unroll", "outputs": []},
        {"inputs": {"loop": "co_1"}, "kind": "unroll", "outputs": []},
        {"inputs": {"loop": "co_2"}, "kind": "vectorize", "outputs": []},
        {"inputs": {"block": "conv2d_nhwc", "scope": "local"}, "kind": "cache_write", "outputs": ["conv2d_nhwc_wb"]},
        {"inputs": {"block": "conv2d_nhwc_wb", "loop": "co_0"}, "kind": "reverse_compute_at", "outputs": []},
        {"inputs": {"factors": [None, 16], "loop": "ax3_1"}, "kind": "split", "outputs": ["ax3_1_0", "ax3_1_1"]},
        {"inputs": {"loop": "ax3_1_1"}, "kind": "vectorize", "outputs": []},
        {"inputs": {"loop": "ax1_1"}, "kind": "unroll", "outputs": []},
        {"inputs": {"loop": "ax2_1"}, "kind": "unroll", "outputs": []},
        {"inputs": {"loop": "ax3_1_0"}, "kind": "unroll", "outputs": []}],
        "names": ["X", "W", "conv2d_nhwc", "n", "h", "w", "co", "rh", "rw", "rc", "conv2d_nhwc", "v_n", "v_h", "v_w",
                  "v_co", "v_rh", "v_rw", "v_rc"], "version": 1, "workload_key": wl.key}
    return wl, tg.Schedule.replay(wl, json.dumps(trace))


def test_updates_split_by_a_guarded_tail_group_too(rng):
    # every register's eight unrolled updates become two dot steps: the unguarded rows' past the
    # guards between them, the guarded rows' once their guards (one per iteration) are merged
    wl, sch = _guarded_tail_conv()
    lowered = lower(sch.func, AVX512_VNNI)
    registers = 2 * 3 * 2  # co_1 x w x h_2, half of them under the guard
    assert _dot_steps(lowered) == registers * 8 // 4  # rc_1's 8 unrolled updates in fours (none left single)
    a = rng.integers(0, 256, (1, 7, 3, 24)).astype(np.uint8)
    b = rng.integers(-128, 128, (1, 1, 24, 64)).astype(np.int8)
    got = interpret(lowered, a.reshape(-1), b.reshape(-1), outputs=1).reshape(1, 7, 3, 64)
    want = np.einsum("nhwc,co->nhwo", a.astype(np.int64), b[0, 0].astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, interpret(sch, a, b))


@pytest.mark.needs_cc
def test_the_avx2_step_agrees_bit_for_bit_and_wraps(rng):
    """AVX2's step (vpmaddwd on 16-bit pairs) on odd sizes and on the extremes: 255 x -128 pairs
    (the largest 16-bit pair sums, no saturation) and sums past 2**31, wrapping as the interpreter's."""
    host = tg.Target("cpu")
    if host.arch != "x86_64" or host.isa not in ("avx2", "avx512"):
        pytest.skip("AVX2 code runs on x86 CPUs with AVX2")
    for m, n, k, extreme in ((13, 40, 37, False), (2, 16, 70000, True)):
        lowered = lower(_schedule(_matmul(m, n, k), AVX2).func, AVX2)
        src = codegen_c(lowered)
        assert "tgh_u8s8_dot4_v8si(" in src.code or "tgh_u8s8_dot4p_v8si(" in src.code  # rows or pairs
        kernel = Kernel(compile_c(src.code, AVX2, name=src.entry), src.entry, inputs=lowered.params[:2],
                        outputs=lowered.params[2:], source=src.code, target=AVX2, lowered=lowered)
        a, b = _inputs(m, n, k, rng)
        if extreme:
            a[:] = 255
            b[:] = 127
            b[:, 1] = -128
        out = np.full(m * n, -12345, np.int32)  # poisoned
        kernel(a.reshape(-1), b.reshape(-1), out=out)
        np.testing.assert_array_equal(out.reshape(m, n), _exact(a, b))
        if extreme:
            assert out[0] < 0 < out[1]  # wrapped both ways


@pytest.mark.needs_cc
@pytest.mark.parametrize("hardware", [False, True])
def test_an_eight_column_tail_takes_ymm_steps(hardware, rng):
    """24 columns (MobileNet-V2's 24-channel projections) take 8-lane registers (16 lanes would pad
    them to 32: state.choose_vec_width); with VNNI they take vpdpbusd on a ymm register, bit for bit."""
    _skip_unless_runnable(hardware)
    m, n, k = 9, 24, 23
    lowered = lower(_schedule(_matmul(m, n, k), AVX512_VNNI).func, AVX512_VNNI)
    lanes = {x.dtype.lanes for s in walk_stmts(lowered.body) for e in stmt_exprs(s) for x in walk(e)
             if isinstance(x, Call) and x.name == DOT4}
    assert 8 in lanes
    kernel = _kernel(_matmul(m, n, k), hardware)
    a, b = _inputs(m, n, k, rng)
    out = np.full(m * n, -12345, np.int32)  # poisoned
    kernel(a.reshape(-1), b.reshape(-1), out=out)
    np.testing.assert_array_equal(out.reshape(m, n), _exact(a, b))
