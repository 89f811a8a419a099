import ctypes
import os
import threading

import pytest

from tilegraph.build import compile as compile_module
from tilegraph.build.cache import LIBRARY_FILE, MANIFEST_FILE, SOURCE_FILE
from tilegraph.build.compile import compile_c
from tilegraph.errors import BuildError
from tilegraph.target import Target

SOURCE = """
#include <stdint.h>
int32_t tg_answer(int32_t x) { return x + %d; }
"""


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def compiler_calls(monkeypatch):
    calls = []
    real = compile_module.run_compiler

    def counting(command, timeout):
        calls.append(command)
        return real(command, timeout)

    monkeypatch.setattr(compile_module, "run_compiler", counting)
    return calls


def _answer(path, x=1):
    function = ctypes.CDLL(str(path)).tg_answer
    function.argtypes, function.restype = [ctypes.c_int32], ctypes.c_int32
    return function(x)


@pytest.mark.needs_cc
def test_compiles_into_content_addressed_entry(private_cache, compiler_calls):
    path = compile_c(SOURCE % 41, Target(), name="answer")
    assert path.name == LIBRARY_FILE and path.parent.parent == private_cache / "build"
    assert len(path.parent.name) == 64
    assert (path.parent / SOURCE_FILE).read_text() == SOURCE % 41
    assert (path.parent / MANIFEST_FILE).exists()
    assert _answer(path) == 42
    assert len(compiler_calls) == 1
    assert not [p for p in (private_cache / "build").iterdir() if p.name.startswith(".")]


@pytest.mark.needs_cc
def test_second_compile_is_a_cache_hit(compiler_calls):
    first = compile_c(SOURCE % 1, Target())
    second = compile_c(SOURCE % 1, Target())
    assert first == second and len(compiler_calls) == 1
    third = compile_c(SOURCE % 2, Target())
    assert third != first and len(compiler_calls) == 2


@pytest.mark.needs_cc
def test_key_depends_on_flags_and_compiler_version(compiler_calls):
    base = Target()
    paths = {compile_c(SOURCE % 3, base),
             compile_c(SOURCE % 3, Target(cflags=(*base.cflags, "-DEXTRA"))),
             compile_c(SOURCE % 3, Target(cc_version="gcc (other) 1.0"))}
    assert len(paths) == 3 and len(compiler_calls) == 3


@pytest.mark.needs_cc
@pytest.mark.parametrize("damage", ["truncate_so", "delete_manifest", "garble_manifest", "delete_so"])
def test_broken_entry_is_rebuilt(damage, compiler_calls):
    path = compile_c(SOURCE % 5, Target())
    manifest = path.parent / MANIFEST_FILE
    if damage == "truncate_so":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "delete_manifest":
        manifest.unlink()
    elif damage == "garble_manifest":
        manifest.write_text("{not json")
    else:
        path.unlink()
    rebuilt = compile_c(SOURCE % 5, Target())
    assert len(compiler_calls) == 2
    assert rebuilt == path and _answer(rebuilt, 10) == 15
    assert compile_c(SOURCE % 5, Target()) == path and len(compiler_calls) == 2


@pytest.mark.needs_cc
def test_concurrent_compiles_of_the_same_source_both_succeed(compiler_calls):
    barrier = threading.Barrier(2)
    results, errors = [], []

    def build():
        barrier.wait()
        try:
            results.append(compile_c(SOURCE % 7, Target()))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    workers = [threading.Thread(target=build) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors and len(results) == 2 and results[0] == results[1]
    assert _answer(results[0]) == 8


@pytest.mark.needs_cc
def test_compile_error_reports_stderr_and_keeps_source():
    bad = "int tg_broken(void) { return undefined_name; }\n"
    with pytest.raises(BuildError) as caught:
        compile_c(bad, Target(), name="broken")
    error = caught.value
    assert "undefined_name" in str(error) and "broken" in str(error)
    assert error.source_path is not None and os.path.exists(error.source_path)
    assert open(error.source_path).read() == bad
    assert error.source_path in str(error)


@pytest.mark.needs_cc
def test_compiler_output_is_trimmed():
    bad = "".join(f"int f{i}(void) {{ return missing{i}; }}\n" for i in range(100))
    with pytest.raises(BuildError, match=r"more lines") as caught:
        compile_c(bad, Target())
    assert str(caught.value).count("\n") < 50


def test_missing_compiler_says_how_to_install():
    with pytest.raises(BuildError, match=r"/nonexistent/gcc.*apt-get install gcc"):
        compile_c(SOURCE % 1, Target(cc="/nonexistent/gcc"))


def test_compiler_timeout_is_a_build_error(tmp_path):
    slow = tmp_path / "slowcc"
    slow.write_text("#!/bin/sh\nsleep 10\n")
    slow.chmod(0o755)
    with pytest.raises(BuildError, match="timed out after 0.3 s") as caught:
        compile_c(SOURCE % 1, Target(cc=str(slow), cc_version="slow 1"), timeout=0.3)
    assert caught.value.source_path is not None


def test_rejects_non_cpu_targets_and_bad_source():
    with pytest.raises(ValueError, match="cpu targets"):
        compile_c(SOURCE % 1, Target("opencl"))
    with pytest.raises(TypeError, match="source"):
        compile_c(b"int x;", Target())
    with pytest.raises(TypeError, match="Target"):
        compile_c("int x;", "cpu")


@pytest.mark.needs_cc
@pytest.mark.slow
def test_two_processes_compiling_the_same_source_both_succeed(private_cache):
    import subprocess
    import sys

    script = ("import sys; from tilegraph.build.compile import compile_c; from tilegraph.target import Target; "
              f"print(compile_c({SOURCE % 9!r}, Target()))")
    env = {**os.environ, "TILEGRAPH_CACHE_DIR": str(private_cache)}
    workers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env) for _ in range(2)]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    paths = {stdout.strip() for stdout, _ in outputs}
    assert len(paths) == 1 and _answer(paths.pop()) == 10
