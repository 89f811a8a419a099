"""One meaning for every scalar operator: random expressions over int8, int32, float32 and bfloat16,
checked interpreter == compiled C == OpenCL on PoCL, and, for integers, against an arbitrary-precision
oracle written from the definition in te/expr.py. bfloat16 arithmetic is float32 arithmetic rounded
to bfloat16 after every operation (dtype.bfloat16_bits), bit for bit everywhere.

Integer semantics under test: `//` and `%` are floor division and its remainder; `x // 0 == x % 0
== 0`; `INT_MIN // -1 == INT_MIN`; 8-bit arithmetic wraps at every operation; int32 overflow of
+, -, * is undefined (elements where the oracle sees it are left out of the comparison). Float
results are compared bit for bit (NaN equal to NaN) with FMA contraction switched off, since the
default flags allow `a * b + c` to round once.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph import te
from tilegraph.target import Target

N = 11  # elements per input: odd, and not a multiple of any vector width
SPECIAL = {
    "int8": [-128, -127, -1, 0, 1, 2, 3, 7, 127],
    "int32": [-(2**31), -(2**31) + 1, -1, 0, 1, 2, 3, 7, 2**31 - 1, -100000, 65536],
    "float32": [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.25, 1e30, -1e-30, math.inf, -math.inf, math.nan],
}
SPECIAL["bfloat16"] = SPECIAL["float32"] + [1.00390625, 3.3895314e38, 9.2e-41]  # a tie, max bfloat16, subnormal
FLOATS = ("float32", "bfloat16")
INT_OPS = ("add", "sub", "mul", "floordiv", "floormod", "max", "min", "select", "neg")
FLOAT_OPS = INT_OPS + ("div", "abs")
EXPRS_PER_KERNEL = 12


def _expr_tree(ops: tuple[str, ...], n_inputs: int) -> st.SearchStrategy:
    leaves = st.one_of(st.tuples(st.just("input"), st.integers(0, n_inputs - 1)),
                       st.tuples(st.just("const"), st.integers(0, 10)))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.tuples(st.sampled_from([o for o in ops if o not in ("neg", "abs", "select")]), children, children),
            st.tuples(st.sampled_from([o for o in ops if o in ("neg", "abs")]), children),
            st.tuples(st.just("select"), st.sampled_from(("lt", "eq", "ge")), children, children, children, children),
        )

    return st.recursive(leaves, extend, max_leaves=6)


def _consts(dtype: str) -> list:
    if dtype in FLOATS:
        return [0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -7.25, 1e30, -0.0, 1e-3, 5.0]
    return (SPECIAL[dtype] + [5, -2])[:11]


def _to_te(tree, inputs, i, dtype):  # noqa: ANN001, ANN202
    kind = tree[0]
    if kind == "input":
        return inputs[tree[1]][i]
    if kind == "const":
        return te.const(_consts(dtype)[tree[1]], dtype)
    args = [_to_te(t, inputs, i, dtype) for t in tree[1:] if isinstance(t, tuple)]
    if kind == "neg":
        return -args[0]
    if kind == "abs":
        return te.abs_(args[0])
    if kind == "select":
        a, b, t, f = args
        return te.select(getattr(a, tree[1])(b), t, f)
    return {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "div": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
            "max": te.max_, "min": te.min_}[kind](*args)


def _oracle(tree, values: list[int], dtype: str):  # noqa: ANN001, ANN202
    """The integer definition, on Python ints; None where int32 overflow makes the result undefined."""
    bits = 8 if dtype == "int8" else 32
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def wrap(x: int) -> int:
        return (x - lo) % (2**bits) + lo

    def fit(x: int | None) -> int | None:
        if x is None:
            return None
        if lo <= x <= hi:
            return x
        return wrap(x) if bits == 8 else None

    def ev(t) -> int | None:  # noqa: ANN001
        kind = t[0]
        if kind == "input":
            return values[t[1]]
        if kind == "const":
            return _consts(dtype)[t[1]]
        args = [ev(c) for c in t[1:] if isinstance(c, tuple)]
        if any(a is None for a in args):
            return None
        if kind == "neg":
            return fit(-args[0])
        if kind == "select":
            a, b, x, y = args
            return x if {"lt": a < b, "eq": a == b, "ge": a >= b}[t[1]] else y
        a, b = args
        if kind in ("floordiv", "floormod"):
            if b == 0:
                return 0
            if kind == "floordiv":
                return wrap(a // b)  # only INT_MIN // -1 leaves the range, and it wraps by definition
            return a % b
        return fit({"add": a + b, "sub": a - b, "mul": a * b, "max": max(a, b), "min": min(a, b)}[kind])

    return ev(tree)


def _inputs(draw_values: list, dtype: str, n_inputs: int) -> list[np.ndarray]:
    if dtype == "bfloat16":
        import ml_dtypes

        return [np.array(draw_values[k * N:(k + 1) * N], np.float32).astype(ml_dtypes.bfloat16) for k in range(n_inputs)]
    return [np.array(draw_values[k * N:(k + 1) * N], dtype=dtype) for k in range(n_inputs)]


def _value_strategy(dtype: str) -> st.SearchStrategy:
    if dtype in FLOATS:
        return st.one_of(st.sampled_from(SPECIAL[dtype]), st.floats(-1e4, 1e4, width=32))
    info = np.iinfo(dtype)
    return st.one_of(st.sampled_from(SPECIAL[dtype]), st.integers(-20, 20), st.integers(int(info.min), int(info.max)))


def _exact_target() -> Target:
    host = Target("cpu")
    flags = tuple("-ffp-contract=off" if f.startswith("-ffp-contract") else f for f in host.cflags)
    return dataclasses.replace(host, cflags=flags)


def _exact_opencl_kernel(wl: tg.Workload):  # noqa: ANN202
    """The OpenCL kernel tg.build makes, with contraction off as in _exact_target (OpenCL C
    contracts `a * b + c` by default)."""
    from tilegraph.codegen.opencl import codegen_opencl
    from tilegraph.lower.gpu.pipeline import lower_gpu
    from tilegraph.runtime.opencl import OpenCLKernel

    program = lower_gpu(tg.Schedule(wl).func, Target("opencl"))
    src = codegen_opencl(program)
    src = dataclasses.replace(src, code="#pragma OPENCL FP_CONTRACT OFF\n" + src.code)
    return OpenCLKernel(program, src, len(wl.inputs))


def _workload(trees, dtype: str, n_inputs: int) -> tg.Workload:
    xs = [te.placeholder((N,), dtype, name=f"X{k}") for k in range(n_inputs)]
    outs = [te.compute((N,), lambda i, t=t: _to_te(t, xs, i, dtype), name=f"E{j}") for j, t in enumerate(trees)]
    return tg.Workload(inputs=xs, outputs=outs)


def _same(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> bool:
    if mask is not None:
        a, b = a[mask], b[mask]
    if a.dtype.name == "bfloat16":  # widening is exact: equal as float32 means the same bfloat16 number
        a, b = a.astype(np.float32), b.astype(np.float32)
    if a.dtype.kind == "f":
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return bool(np.array_equal(a, b))


def check_expressions(trees, values, dtype: str, n_inputs: int, opencl: bool) -> None:
    wl = _workload(trees, dtype, n_inputs)
    arrays = _inputs(values, dtype, n_inputs)
    interpreted = tg.interpret(tg.Schedule(wl), *arrays)
    compiled = tg.build(tg.Schedule(wl), target=_exact_target())(*arrays)
    for j, tree in enumerate(trees):
        mask = None
        if dtype not in FLOATS:
            expected = [_oracle(tree, [int(a[e]) for a in arrays], dtype) for e in range(N)]
            mask = np.array([v is not None for v in expected])
            ref = np.array([0 if v is None else v for v in expected], dtype=dtype)
            assert _same(interpreted[j], ref, mask), (tree, arrays, interpreted[j], ref)
        assert _same(compiled[j], interpreted[j], mask), (tree, arrays, compiled[j], interpreted[j])
    if opencl:
        got = _exact_opencl_kernel(wl)(*arrays)
        got = got if isinstance(got, tuple) else (got,)
        for j, tree in enumerate(trees):
            mask = None if dtype in FLOATS else np.array(
                [_oracle(tree, [int(a[e]) for a in arrays], dtype) is not None for e in range(N)])
            assert _same(got[j], interpreted[j], mask), ("opencl", tree, arrays, got[j], interpreted[j])


def _opencl_available() -> bool:
    try:
        from tilegraph.runtime.opencl import available
    except ImportError:
        return False
    return available()


def _case(dtype: str) -> st.SearchStrategy:
    ops = FLOAT_OPS if dtype in FLOATS else INT_OPS
    return st.integers(1, 3).flatmap(lambda n: st.tuples(
        st.just(n),
        st.lists(_expr_tree(ops, n), min_size=EXPRS_PER_KERNEL, max_size=EXPRS_PER_KERNEL),
        st.lists(_value_strategy(dtype), min_size=3 * N, max_size=3 * N)))


@pytest.mark.needs_cc
@pytest.mark.parametrize("dtype", ["int8", "int32", "float32", "bfloat16"])
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_random_expressions_mean_the_same_everywhere(dtype, data):
    """Seeded, so the default suite is reproducible; the slow run below explores afresh each time."""
    n_inputs, trees, values = data.draw(_case(dtype))
    check_expressions(trees, values, dtype, n_inputs, opencl=_opencl_available())


@pytest.mark.slow
@pytest.mark.needs_cc
@pytest.mark.parametrize("dtype", ["int8", "int32", "float32", "bfloat16"])
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_expressions_mean_the_same_everywhere_long(dtype, data):
    n_inputs, trees, values = data.draw(_case(dtype))
    check_expressions(trees, values, dtype, n_inputs, opencl=_opencl_available())


@pytest.mark.needs_cc
@pytest.mark.parametrize("op, expected", [
    ("/", None),
    ("//", [-4, -3, -2, -1, 0, 1, 2, 3]),
    ("%", [1, 1, 1, 1, 1, 1, 1, 1]),
])
def test_negative_int32_division_agrees_between_interpreter_and_kernel(op, expected):
    a = te.placeholder((8,), "int32", name="A")
    values = np.array([-7, -5, -3, -1, 1, 3, 5, 7], dtype="int32")
    if op == "/":
        with pytest.raises(TypeError, match="use '//'"):
            te.compute((8,), lambda i: a[i] / 2, name="C")
        return
    c = te.compute((8,), (lambda i: a[i] // 2) if op == "//" else (lambda i: a[i] % 2), name="C")
    wl = tg.Workload(inputs=[a], outputs=[c])
    np.testing.assert_array_equal(tg.interpret(tg.Schedule(wl), values), expected)
    np.testing.assert_array_equal(tg.build(tg.Schedule(wl))(values), expected)
    np.testing.assert_array_equal(np.floor_divide(values, 2) if op == "//" else np.remainder(values, 2), expected)


@pytest.mark.needs_cc
@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_division_by_zero_and_int_min_by_minus_one_do_not_trap(dtype):
    """Used to kill the process with SIGFPE; now defined: x // 0 == x % 0 == 0, MIN // -1 == MIN."""
    lo = int(np.iinfo(dtype).min)
    a = te.placeholder((4,), dtype, name="A")
    b = te.placeholder((4,), dtype, name="B")
    q = te.compute((4,), lambda i: a[i] // b[i], name="Q")
    r = te.compute((4,), lambda i: a[i] % b[i], name="R")
    wl = tg.Workload(inputs=[a, b], outputs=[q, r])
    x = np.array([5, lo, -3, lo], dtype=dtype)
    y = np.array([0, -1, 0, 0], dtype=dtype)
    for got in (tg.interpret(tg.Schedule(wl), x, y), tg.build(tg.Schedule(wl))(x, y)):
        np.testing.assert_array_equal(got[0], np.array([0, lo, 0, 0], dtype=dtype))
        np.testing.assert_array_equal(got[1], np.zeros(4, dtype=dtype))


@pytest.mark.needs_cc
def test_signed_zeros_survive_the_c_compiler():
    """GCC 12 folds `0.0f - fabsf(x)` to `-fabsf(x)` (-0.0 for x == 0, where IEEE gives +0.0); the
    printer's abs clears the sign bit instead. And `-x` on floats is IEEE negation, as in numpy."""
    a = te.placeholder((4,), name="A")
    one = te.const(1.0)
    c = te.compute((4,), lambda i: one // (te.const(0.0) - te.abs_(a[i])) + one // (-a[i]) * 2.0, name="C")
    wl = tg.Workload([a], [c])
    x = np.array([0.0, -0.0, 2.0, -3.0], np.float32)
    with np.errstate(all="ignore"):
        want = (1.0 // (np.float32(0.0) - np.abs(x)) + 1.0 // (-x) * 2.0).astype(np.float32)
    got = tg.build(wl, Target("cpu", isa="avx2"))(x)
    np.testing.assert_array_equal(tg.interpret(wl, x), want)
    np.testing.assert_array_equal(got, want)
