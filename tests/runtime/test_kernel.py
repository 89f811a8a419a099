import ctypes
import os

import numpy as np
import pytest

from tilegraph import dtype as dt
from tilegraph.build.compile import compile_c
from tilegraph.loop.ir import Buffer
from tilegraph.runtime import threads
from tilegraph.runtime.kernel import Kernel, load_library
from tilegraph.runtime.timer import TimingResult
from tilegraph.target import Target

N = 1000
# `calls` counts native entries, so tests can prove a rejected call never reached C.
SOURCE = f"""
#include <stdint.h>
#include <omp.h>
int32_t calls = 0;
int32_t threads_seen = 0;

void tg_add(const float* a, const float* b, float* c, int32_t num_threads) {{
  calls++;
  #pragma omp parallel for num_threads(num_threads)
  for (int64_t i = 0; i < {N}; ++i) c[i] = a[i] + b[i];
  #pragma omp parallel num_threads(num_threads)
  {{
    #pragma omp single
    threads_seen = omp_get_num_threads();
  }}
}}

void tg_sum_diff(const double* a, const double* b, double* s, double* d, int32_t num_threads) {{
  calls++;
  (void)num_threads;
  for (int64_t i = 0; i < 6; ++i) {{ s[i] = a[i] + b[i]; d[i] = a[i] - b[i]; }}
}}
"""
A, B, C = (Buffer(name, (N,), dt.float32) for name in "ABC")
X, Y = (Buffer(name, (2, 3), dt.float64) for name in "XY")
S, D = (Buffer(name, (2, 3), dt.float64) for name in "SD")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return compile_c(SOURCE, Target(), name="runtime_test")


@pytest.fixture
def add(library):
    return Kernel(library, "tg_add", [A, B], [C], source=SOURCE, target=Target())


@pytest.fixture
def sum_diff(library):
    return Kernel(library, "tg_sum_diff", [X, Y], [S, D], source=SOURCE, target=Target())


@pytest.fixture(autouse=True)
def restore_threads():
    yield
    threads.reset_num_threads()


def native_calls(library):
    return ctypes.c_int32.in_dll(load_library(library), "calls").value


def threads_seen(library):
    return ctypes.c_int32.in_dll(load_library(library), "threads_seen").value


@pytest.fixture
def ab(rng):
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


pytestmark = pytest.mark.needs_cc


def test_adds_and_allocates_output(add, ab):
    a, b = ab
    c = add(a, b)
    assert c.shape == (N,) and c.dtype == np.float32
    np.testing.assert_allclose(c, a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)
    assert add.source == SOURCE and add.entry == "tg_add" and add.target == Target() and add.lib_path.exists()


def test_writes_into_out(add, ab):
    a, b = ab
    out = np.full(N, np.nan, dtype=np.float32)
    assert add(a, b, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) + b, rtol=1e-6)


def test_two_outputs_return_a_tuple(sum_diff, rng):
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    s, d = sum_diff(x, y)
    np.testing.assert_allclose(s, x + y)
    np.testing.assert_allclose(d, x - y)
    outs = (np.full((2, 3), np.nan), np.full((2, 3), np.nan))
    assert sum_diff(x, y, out=outs) == outs
    np.testing.assert_allclose(outs[1], x - y)


def test_thread_count_per_call_global_and_default(add, ab, library):
    a, b = ab
    add(a, b, num_threads=1)
    assert add.last_num_threads == 1 and threads_seen(library) == 1
    threads.set_num_threads(2)
    add(a, b)
    assert add.last_num_threads == 2 and threads_seen(library) == 2
    threads.reset_num_threads()
    add(a, b)
    assert add.last_num_threads == add.target.num_cores
    single = Kernel(add.lib_path, "tg_add", [A, B], [C], source=SOURCE, target=Target(num_cores=1))
    single(a, b)
    assert single.last_num_threads == 1 and threads_seen(library) == 1


def _bad_cases(a, b):
    c = np.empty(N, np.float32)
    read_only = np.empty(N, np.float32)
    read_only.flags.writeable = False
    both = np.empty(2 * N, np.float32)
    return [
        ((a,), {}, TypeError, "takes 2 input arrays"),
        ((a, b, b), {}, TypeError, "takes 2 input arrays"),
        ((a, list(b)), {}, TypeError, r"input 1 \('B'\) must be a numpy.ndarray"),
        ((a, b.astype(np.float64)), {}, TypeError, r"input 1 \('B'\) has dtype float64, expected float32"),
        ((a.astype(">f4"), b), {}, TypeError, "input 0"),
        ((a[:-1], b), {}, ValueError, r"input 0 \('A'\) has shape \(999,\), expected \(1000,\)"),
        ((a.reshape(10, 100), b), {}, ValueError, "has shape"),
        ((np.empty(2 * N, np.float32)[::2], b), {}, ValueError, "np.ascontiguousarray"),
        ((a, b), {"out": read_only}, ValueError, "output 'C' is read-only"),
        ((a, b), {"out": np.empty(N, np.float16)}, TypeError, r"output 0 \('C'\) has dtype float16"),
        ((a, b), {"out": np.empty(N + 1, np.float32)}, ValueError, "output 0"),
        ((a, b), {"out": a}, ValueError, "output 'C' overlaps input 'A'"),
        ((both[:N], b), {"out": both[N // 2:N // 2 + N]}, ValueError, "overlaps input 'A'"),
        ((a, b), {"out": (c, c)}, TypeError, "has 1 outputs"),
        ((a, b), {"out": "c"}, TypeError, "out must be"),
        ((a, b), {"num_threads": 0}, ValueError, "num_threads must be at least 1"),
        ((a, b), {"num_threads": 1.5}, TypeError, "num_threads must be an int"),
    ]


def test_bad_arguments_never_reach_native_code(add, ab, library):
    a, b = ab
    before = native_calls(library)
    for args, kwargs, error, message in _bad_cases(a, b):
        with pytest.raises(error, match=message):
            add(*args, **kwargs)
    assert native_calls(library) == before
    add(a, b)
    assert native_calls(library) == before + 1


def test_misaligned_input_is_rejected(add, ab):
    raw = np.zeros(N * 4 + 1, dtype=np.uint8)[1:].view(np.float32)
    assert not raw.flags.aligned
    with pytest.raises(ValueError, match="not aligned"):
        add(raw, ab[1])


def test_outputs_must_not_overlap_each_other(sum_diff, rng, library):
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    shared = np.empty((2, 3))
    before = native_calls(library)
    with pytest.raises(ValueError, match="output 'D' overlaps output 'S'"):
        sum_diff(x, y, out=(shared, shared))
    inputs_alias_each_other = sum_diff(x, x)
    np.testing.assert_allclose(inputs_alias_each_other[0], 2 * x)
    assert native_calls(library) == before + 1


def test_time_returns_timing_result(add, ab, library):
    before = native_calls(library)
    result = add.time(*ab, warmup=1, min_time=0.01, repeat=3, num_threads=1)
    assert isinstance(result, TimingResult) and len(result.samples) >= 3
    assert 0 < result.min <= result.median <= result.max and result.spread >= 0
    assert add.last_num_threads == 1 and native_calls(library) > before + 3
    flushed = add.time(*ab, warmup=1, min_time=0.0, repeat=2, flush_cache=True)
    assert len(flushed.samples) == 2
    with pytest.raises(TypeError, match="dtype"):
        add.time(ab[0].astype(np.float64), ab[1])


def test_outputs_and_timed_inputs_start_on_a_cache_line(add, ab, monkeypatch):
    """numpy starts arrays 16 bytes past a line, where a vector load can split two lines: a kernel
    allocates its outputs on a line, as a compiled model's arena does, and times inputs that are not
    on one on aligned copies (the tuner's runner times candidates so), leaving the caller's as given."""
    assert add(*ab).ctypes.data % 64 == 0
    raw = np.zeros(N + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + 4  # 16 bytes past a line
    off = raw[start:start + N]
    off[:] = ab[0]
    seen = []
    bind = type(add).bind
    monkeypatch.setattr(type(add), "bind", lambda self, inputs, outputs, num_threads=None: (
        seen.append([a.ctypes.data % 64 for a in (*inputs, *outputs)]) or bind(self, inputs, outputs, num_threads)))
    add.time(off, ab[1], warmup=1, min_time=0.0, repeat=2)
    assert seen and all(offset == 0 for offset in seen[-1])
    assert off.ctypes.data % 64 == 16 and np.array_equal(off, ab[0])
    with pytest.raises(ValueError, match="not aligned"):  # misaligned for its dtype: refused, not copied
        add.time(np.zeros(N * 4 + 1, dtype=np.uint8)[1:].view(np.float32), ab[1])


def test_construction_errors(library):
    with pytest.raises(ValueError, match="no function named 'tg_missing'"):
        Kernel(library, "tg_missing", [A, B], [C], source=SOURCE, target=Target())
    with pytest.raises(ValueError, match="cannot run"):
        Kernel(library, "tg_add", [A, B], [C], source=SOURCE, target=Target(arch="riscv64", isa="generic", cflags=()))
    with pytest.raises(ValueError, match="cpu libraries"):
        Kernel(library, "tg_add", [A, B], [C], source=SOURCE, target=Target("opencl"))
    with pytest.raises(ValueError, match="padding"):
        Kernel(library, "tg_add", [A, B], [Buffer("C", (N,), dt.float32, padding=(4,))], source=SOURCE,
               target=Target())
    with pytest.raises(TypeError, match="Buffer"):
        Kernel(library, "tg_add", [A, "B"], [C], source=SOURCE, target=Target())


def test_library_is_loaded_once(library):
    assert load_library(library) is load_library(str(library))


def _value_library(tmp_path, value, signature=None):
    """A library exporting `int32_t tg_value(void)` returning `value` (and, when given, a signature)."""
    sig = "" if signature is None else f'const char tg_value_signature[] = "{signature}";'
    return compile_c(f"#include <stdint.h>\nint32_t tg_value(void) {{ return {value}; }}\n{sig}\n", Target(),
                     name=f"value_{value}")


def test_a_library_replaced_at_the_same_path_is_loaded_anew(tmp_path, monkeypatch):
    """The dynamic loader returns what it loaded for a path even after the file was replaced (a
    model saved again into its folder); libraries are loaded by content instead."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "k0.so"
    for value in (1, 2, 1):  # replaced as a save replaces files: a new file renamed over the old one
        (tmp_path / "new.so").write_bytes(_value_library(tmp_path, value).read_bytes())
        os.replace(tmp_path / "new.so", path)  # (rewriting a loaded library in place would corrupt its mapping)
        assert load_library(path).tg_value() == value


def test_a_recorded_sha256_is_checked_before_loading(tmp_path, monkeypatch):
    from tilegraph.build.cache import sha256_file
    from tilegraph.runtime.kernel import LibraryMismatch

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "k0.so"
    path.write_bytes(_value_library(tmp_path, 7).read_bytes())
    digest = sha256_file(path)
    assert load_library(path, digest).tg_value() == 7
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: refused before the loader sees the file
    path.write_bytes(bytes(data))
    with pytest.raises(LibraryMismatch, match="changed or damaged"):
        load_library(path, digest)


def test_a_library_of_another_kernel_is_refused_by_its_signature(library, tmp_path):
    from tilegraph.codegen.c import kernel_signature
    from tilegraph.runtime.kernel import LibraryMismatch

    other = _value_library(tmp_path, 3, kernel_signature([Buffer("x", (2, 4), dt.float32)] * 2))
    with pytest.raises(LibraryMismatch, match="not the kernel asked for"):
        Kernel(other, "tg_value", [Buffer("x", (2, 8), dt.float32)], [Buffer("y", (2, 8), dt.float32)], "", Target())
    Kernel(other, "tg_value", [Buffer("x", (8,), dt.float32)], [Buffer("y", (2, 4), dt.float32)], "", Target())
