"""SIMD math helpers of the C printer (tgh_exp_v16sf, ...), compiled and compared with float64
references over normal ranges, tiny/huge values, signed zeros, infinities, NaN and denormals."""

import re

import numpy as np
import pytest
import scipy.special

import tilegraph as tg
from tilegraph import te
from tilegraph.codegen.vector_math import VECTOR_MATH, vector_math_helpers
from tilegraph.runtime.kernel import Kernel

NATIVE = tg.Target("cpu")
# 128-bit vectors (v4sf) and, where the host runs them, 256-bit ones (v8sf).
TARGETS = [NATIVE, tg.Target.from_string("cpu -isa=generic")]
if NATIVE.isa == "avx512":
    TARGETS.append(tg.Target.from_string("cpu -isa=avx2"))

FUNCTIONS = {
    "exp": (te.exp, np.exp),
    "log": (te.log, np.log),
    "tanh": (te.tanh, np.tanh),
    "sigmoid": (te.sigmoid, scipy.special.expit),
    "erf": (te.erf, scipy.special.erf),
    "sqrt": (te.sqrt, np.sqrt),
    "rsqrt": (te.rsqrt, lambda x: 1.0 / np.sqrt(x)),
    "abs": (te.abs_, np.abs),
    "floor": (te.floor, np.floor),
    "ceil": (te.ceil, np.ceil),
    "round": (te.round_, np.rint),
    **{name: ((lambda fn: lambda x: te.call(fn, x))(name), getattr(np, numpy_name)) for name, numpy_name in (
        ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"),
        ("sinh", "sinh"), ("cosh", "cosh"), ("asinh", "arcsinh"), ("acosh", "arccosh"), ("atanh", "arctanh"))},
}
RTOL = {"exp": 4e-7, "log": 4e-7, "sqrt": 4e-7, "rsqrt": 4e-7, "tanh": 2e-6, "sigmoid": 2e-6, "erf": 2e-6,
        "abs": 0.0, "floor": 0.0, "ceil": 0.0, "round": 0.0,
        # lane by lane through libm's float functions (a few ulp)
        **dict.fromkeys(("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"), 1e-6)}
# The interesting range of each function; inputs are a dense grid over it plus the cases below.
RANGES = {"exp": (-104.0, 89.0), "log": (1e-3, 1e3), "tanh": (-10.0, 10.0), "sigmoid": (-110.0, 110.0),
          "erf": (-5.0, 5.0), "sqrt": (0.0, 1e4), "rsqrt": (1e-6, 1e4), "abs": (-1e3, 1e3),
          "floor": (-100.0, 100.0), "ceil": (-100.0, 100.0), "round": (-100.0, 100.0), "sin": (-100.0, 100.0),
          "cos": (-100.0, 100.0), "tan": (-10.0, 10.0), "asin": (-1.0, 1.0), "acos": (-1.0, 1.0), "atan": (-100.0, 100.0),
          "sinh": (-89.0, 89.0), "cosh": (-89.0, 89.0), "asinh": (-1e3, 1e3), "acosh": (1.0, 1e3), "atanh": (-1.0, 1.0)}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 1.4e-45, -1.4e-45,
                     1.17549435e-38, 3.4028235e38, -3.4028235e38, 1e-10, -1e-10, 1e-5, -1e-5, 0.5, -0.5, 1.0, -1.0,
                     88.72283, 88.72284, 88.8, -87.3, -103.2, -103.9, -104.5, -200.0, 1000.0, 8388607.5,
                     -8388607.5, 16777217.0, 0.2499, 0.2501, 0.9999, 1.0001, 3.92, 3.9999, 4.0, 8.99, 9.01],
                    dtype=np.float32)
N = 1 << 16


def _inputs(name: str) -> np.ndarray:
    lo, hi = RANGES[name]
    rng = np.random.default_rng(7)
    grid = np.linspace(lo, hi, N - 4096 - len(SPECIALS), dtype=np.float64)
    magnitudes = 10.0 ** rng.uniform(-44, 38, 4096)  # every binade, denormals included
    signs = rng.choice([-1.0, 1.0], 4096)
    return np.concatenate([grid, magnitudes * signs, SPECIALS]).astype(np.float32)


def _kernel(name: str, target: tg.Target, n: int = N) -> Kernel:
    x = te.placeholder((n,), name="X")
    fn = FUNCTIONS[name][0]
    y = te.compute((n,), lambda i: fn(x[i]), name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    _, inner = sch.split(sch.loops(y)[0], 64)
    sch.vectorize(inner)
    return tg.build(sch, target=target)


def _lanes(target: tg.Target) -> int:
    return min(16, (target.vector_bits or 128) // 32)


def _check(name: str, a: np.ndarray, out: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        ref = FUNCTIONS[name][1](a.astype(np.float64))
        expected32 = ref.astype(np.float32)
    special = ~np.isfinite(expected32) | (expected32 == 0)
    # Where float32 has no finite nonzero answer (inf, NaN, an underflow to 0) the answer is exact.
    nan_ok = np.isnan(expected32) == np.isnan(out)
    assert nan_ok.all(), f"{name}: NaN mismatch at inputs {a[~nan_ok][:8]}: {out[~nan_ok][:8]}"
    inf = np.isinf(expected32)
    assert (out[inf] == expected32[inf]).all(), f"{name}: inf mismatch at {a[inf][out[inf] != expected32[inf]][:8]}"
    zero = expected32 == 0
    tiny = 2.0 ** -149
    assert (np.abs(out[zero]) <= tiny).all(), f"{name}: underflow mismatch at {a[zero][np.abs(out[zero]) > tiny][:8]}"
    finite = ~special
    err = np.abs(out[finite].astype(np.float64) - ref[finite])
    # denormal results hold fewer bits: one denormal step of slack there
    allowed = RTOL[name] * np.abs(ref[finite]) + (tiny if RTOL[name] else 0.0)
    bad = err > allowed
    worst = np.argmax(err / np.maximum(np.abs(ref[finite]), 1e-300))
    assert not bad.any(), (f"{name}: {bad.sum()} values off, e.g. x={a[finite][bad][:4]} "
                           f"got {out[finite][bad][:4]} want {ref[finite][bad][:4]}; worst x={a[finite][worst]}")


@pytest.mark.needs_cc
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.isa)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_vector_math_matches_float64_reference(name, target):
    kernel = _kernel(name, target)
    helper = f"tgh_{name}_v{_lanes(target)}sf("
    assert helper in kernel.source
    assert "#pragma GCC ivdep" not in kernel.source  # no scalar fallback loop
    a = _inputs(name)
    out = np.full(N, np.nan, np.float32)
    kernel(a, out=out)
    _check(name, a, out)


@pytest.mark.needs_cc
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_signed_zeros_and_infinities_follow_numpy_float32(name):
    kernel = _kernel(name, NATIVE, n=64)
    a = np.resize(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32), 64)
    out = np.full(64, 7.0, np.float32)
    kernel(a, out=out)
    with np.errstate(all="ignore"):
        want = FUNCTIONS[name][1](a.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    finite_zero = want == 0
    assert (np.signbit(out[finite_zero]) == np.signbit(want[finite_zero])).all(), name


@pytest.mark.needs_cc
def test_tail_lanes_and_composed_calls_match_the_interpreter():
    # 13 = 8 + 4 + 1: two vector widths and a scalar tail; the calls are nested
    x = te.placeholder((3, 13), name="X")
    y = te.compute((3, 13), lambda i, j: te.tanh(te.exp(x[i, j] * 0.5)) + te.sqrt(te.abs_(x[i, j])), name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    sch.vectorize(sch.loops(y)[1])
    kernel = tg.build(sch)
    assert "tgh_exp_v8sf(" in kernel.source and "tgh_tanh_v4sf(" in kernel.source
    a = np.random.default_rng(1).standard_normal((3, 13)).astype(np.float32) * 4
    out = np.full((3, 13), np.nan, np.float32)
    kernel(a, out=out)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(out, np.tanh(np.exp(a64 * 0.5)) + np.sqrt(np.abs(a64)), rtol=2e-6)


@pytest.mark.needs_cc
def test_lane_dependent_select_and_casts_run_vectorized():
    x = te.placeholder((4, 32), name="X")
    k = te.placeholder((4, 32), dtype="int32", name="K")
    y = te.compute((4, 32), lambda i, j: te.select(
        te.logical_or(te.logical_and(x[i, j].gt(0.0), te.logical_not(k[i, j].ge(5))), x[i, 0].gt(2.0)),
        x[i, j] * 2.0 + k[i, j].astype("float32"),
        (x[i, j] * 3.0).astype("int32").astype("float32")), name="Y")
    sch = tg.Schedule(te.Workload([x, k], [y]))
    sch.vectorize(sch.loops(y)[1])
    kernel = tg.build(sch)
    assert "tgh_blend_v16sf(" in kernel.source and "__builtin_convertvector(" in kernel.source
    assert "#pragma GCC ivdep" not in kernel.source
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 32)).astype(np.float32) * 3
    b = rng.integers(0, 10, (4, 32)).astype(np.int32)
    out = np.full((4, 32), np.nan, np.float32)
    kernel(a, b, out=out)
    take = ((a > 0) & (b < 5)) | (a[:, :1] > 2)  # the last term is invariant in j: a broadcast mask
    want = np.where(take, a * np.float32(2) + b, np.trunc(a * np.float32(3)))
    np.testing.assert_array_equal(out, want.astype(np.float32))


def test_helpers_are_emitted_once_per_lane_count_with_their_dependencies():
    text = vector_math_helpers({("tanh", 16), ("erf", 16), ("sqrt", 4)})
    assert len(re.findall(r"static inline v16sf tgh_exp_v16sf\(", text)) == 1
    assert text.index("tgh_exp_v16sf(v16sf x)") < text.index("tgh_tanh_v16sf(v16sf x)")
    assert "tgh_sqrt_v4sf(v4sf x)" in text and "tgh_exp_v4sf" not in text and "tgh_log_" not in text
    assert vector_math_helpers(set()) == ""
    assert set(VECTOR_MATH) == set(FUNCTIONS)


@pytest.mark.needs_cc
def test_integer_abs_is_vectorized():
    x = te.placeholder((48,), dtype="int32", name="X")
    y = te.compute((48,), lambda i: te.abs_(x[i]) - 3, name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    sch.vectorize(sch.loops(y)[0])
    kernel = tg.build(sch)
    assert f"tgh_abs_v{_lanes(NATIVE)}si(" in kernel.source
    a = np.arange(-24, 24, dtype=np.int32) * 1000003
    out = np.full(48, -1, np.int32)
    kernel(a, out=out)
    np.testing.assert_array_equal(out, np.abs(a) - 3)
