import math
import re

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.codegen.c import c_const, codegen_c
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, For, Func, seq
from tilegraph.lower.pipeline import lower
from tilegraph.te.expr import BufferLoad, Const, Var

AVX512 = tg.Target.from_string("cpu -isa=avx512")
AVX2 = tg.Target.from_string("cpu -isa=avx2")


def _hexfloat(text: str) -> float:
    return float.fromhex(text.strip("()").rstrip("f"))


@pytest.mark.parametrize("value", [0.1, -2.5, 1e-30, 3.4e38, 0.0])
def test_float_constants_are_exact(value):
    text = c_const(Const(value, dt.float32))
    assert text.endswith("f") or text.endswith("f)")
    assert _hexfloat(text) == float(np.float32(value))
    assert _hexfloat(c_const(Const(value, dt.float64))) == value


def test_special_constants():
    assert c_const(Const(math.inf, dt.float32)) == "INFINITY"
    assert c_const(Const(-math.inf, dt.float32)) == "(-INFINITY)"
    assert c_const(Const(math.nan, dt.float32)) == "NAN"
    assert c_const(Const(-(2 ** 31), dt.int32)) == "(-2147483647 - 1)"
    assert c_const(Const(-3, dt.int32)) == "(-3)"
    assert c_const(Const(True, dt.bool_)) == "1"


def _elementwise(n, name="Y", fn=lambda v: v * 2.0):
    x = te.placeholder((4, n), name="X")
    y = te.compute((4, n), lambda i, j: fn(x[i, j]), name=name)
    return te.Workload([x], [y]), y


def test_vectorized_loop_prints_vector_code():
    wl, y = _elementwise(64)
    sch = tg.Schedule(wl)
    i, j = sch.loops(y)
    sch.vectorize(j)
    sch.parallel(i)
    src = codegen_c(lower(sch.func, AVX512)).code
    assert "v16sf" in src and "*(v16sf_u*)(b_Y + " in src
    assert "#pragma omp parallel for num_threads(num_threads)" in src
    src2 = codegen_c(lower(sch.func, AVX2)).code
    assert "*(v8sf_u*)(b_Y + " in src2


def test_nested_parallel_is_printed_serial():
    wl, y = _elementwise(8)
    sch = tg.Schedule(wl)
    i, j = sch.loops(y)
    sch.parallel(i)
    sch.parallel(j)
    src = codegen_c(lower(sch.func, AVX512)).code
    assert src.count("#pragma omp parallel for") == 1


def test_signature_restrict_and_thread_count():
    wl, _ = _elementwise(5, name="Y")
    code = codegen_c(lower(tg.Schedule(wl).func, AVX512))
    assert re.search(rf"void {code.entry}\(float\* restrict b_X, float\* restrict b_Y, int32_t num_threads\)", code.code)


@pytest.mark.needs_cc
@pytest.mark.parametrize("dtype", ["float16", "int16", "uint16", "uint32", "uint64", "int8", "uint8"])
def test_narrow_and_unsigned_dtypes_compute_as_numpy_does(dtype):
    """Arithmetic wraps at the type's width (16-bit like 8-bit, though C computes them in int);
    float16 rounds to float16 at every store; max/min and floor division have helpers."""
    x = te.placeholder((37,), dtype=dtype, name="X")
    w = te.placeholder((37,), dtype=dtype, name="W")
    y = te.compute((37,), lambda i: te.max_(x[i] * w[i] + x[i], w[i]) // (w[i] + te.const(1, dtype)), name="Y")
    kernel = tg.build(tg.Schedule(te.Workload([x, w], [y])), target="cpu")
    rng = np.random.default_rng(5)
    info = np.finfo(dtype) if dtype == "float16" else np.iinfo(dtype)
    hi = 20.0 if dtype == "float16" else info.max
    if dtype == "float16":
        a, b = rng.uniform(-hi, hi, 37).astype(dtype), rng.uniform(0.5, hi, 37).astype(dtype)
    else:
        a = rng.integers(info.min, info.max, 37, dtype=dtype, endpoint=True)
        b = rng.integers(0, info.max - 1, 37, dtype=dtype, endpoint=True)
    with np.errstate(all="ignore"):
        want = np.floor_divide(np.maximum(a * b + a, b), b + np.array(1, dtype))
    out = np.zeros(37, dtype)
    kernel(a, b, out=out)
    np.testing.assert_array_equal(out, want)


@pytest.mark.needs_cc
def test_hostile_tensor_name_compiles_to_a_safe_identifier(rng):
    bad = 'my-tensor; system("x")'
    x = te.placeholder((3, 5), name=bad)
    y = te.compute((3, 5), lambda i, j: x[i, j] + 1.0, name="out put")
    kernel = tg.build(te.Workload([x], [y]))
    assert 'system("x")' not in kernel.source
    assert "b_my_tensor_system_x_" in kernel.source
    a = rng.standard_normal((3, 5)).astype(np.float32)
    out = np.full((3, 5), np.nan, np.float32)
    kernel(a, out=out)
    np.testing.assert_allclose(out, a + 1.0, rtol=1e-6)


@pytest.mark.needs_cc
def test_floordiv_floormod_on_negative_integers():
    x = te.placeholder((12,), dtype="int32", name="X")
    q = te.compute((12,), lambda i: (x[i] - 5) // 3 + (x[i] - 7) % 4 * 100, name="Q")
    kernel = tg.build(te.Workload([x], [q]))
    a = np.arange(-6, 6, dtype=np.int32)
    out = np.full(12, -999, np.int32)
    kernel(a, out=out)
    np.testing.assert_array_equal(out, (a - 5) // 3 + (a - 7) % 4 * 100)


def _register_func():
    """acc (local, 32 floats) written and read as two aligned 16-lane vectors."""
    a = Buffer("A", (32,), dt.float32)
    out = Buffer("O", (32,), dt.float32)
    acc = Buffer("acc", (32,), dt.float32, scope="local")
    j, h, j2, h2 = Var("j"), Var("h"), Var("j2"), Var("h2")
    fill = For(h, 2, "unrolled", For(j, 16, "vectorized",
               BufferStore(acc, (h * 16 + j,), BufferLoad(a, (h * 16 + j,)) * 2.0)))
    drain = For(h2, 2, "unrolled", For(j2, 16, "vectorized",
                BufferStore(out, (h2 * 16 + j2,), BufferLoad(acc, (h2 * 16 + j2,)) + 1.0)))
    return Func("tg_regs", (a, out), Allocate(acc, seq(fill, drain)))


def test_local_vector_buffer_becomes_registers():
    lowered = lower(_register_func(), AVX512)
    src = codegen_c(lowered).code
    assert re.search(r"v16sf r_acc_0, r_acc_1;", src)
    assert "b_acc[" not in src


@pytest.mark.needs_cc
def test_register_buffer_kernel_runs(tmp_path, rng):
    from tilegraph.build.compile import compile_c
    from tilegraph.runtime.kernel import Kernel

    func = _register_func()
    code = codegen_c(lower(func, tg.Target("cpu")))
    lib = compile_c(code.code, tg.Target("cpu"), name=code.entry)
    kernel = Kernel(lib, code.entry, inputs=func.params[:1], outputs=func.params[1:], source=code.code,
                    target=tg.Target("cpu"))
    a = rng.standard_normal(32).astype(np.float32)
    out = np.full(32, np.nan, np.float32)
    kernel(a, out=out)
    np.testing.assert_allclose(out, a.astype(np.float64) * 2 + 1, rtol=1e-6)
