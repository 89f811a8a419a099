"""build/toolchain.py: compilers found or explained, failures and hangs turned into data."""

import sys

import pytest

import tilegraph as tg
from tilegraph.build.toolchain import (
    CompilerFailed,
    compile_command,
    cuda_compile_command,
    resolve_compiler,
    run_compiler,
    trim_lines,
)


def test_missing_compilers_say_how_to_install_them():
    with pytest.raises(tg.BuildError, match="C compiler 'no-such-cc' not found; install it"):
        resolve_compiler("no-such-cc")
    with pytest.raises(tg.BuildError, match="CUDA compiler.*CUDA toolkit"):
        resolve_compiler("/opt/none/nvcc")


def test_commands():
    assert compile_command("gcc", ["-O3"], "k.c", "k.so") == ["gcc", "-O3", "-o", "k.so", "k.c", "-lm"]
    nvcc = cuda_compile_command("nvcc", ["-arch=sm_80"], "k.c", "k.so")
    assert nvcc[:2] == ["nvcc", "-arch=sm_80"] and nvcc[-5:] == ["-x", "cu", "-o", "k.so", "k.c"]


def test_failures_and_timeouts_are_compiler_failed():
    with pytest.raises(CompilerFailed, match="exit code 3"):
        run_compiler([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])
    with pytest.raises(CompilerFailed, match="timed out"):
        run_compiler([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2)
    assert trim_lines("\n".join(map(str, range(50))), limit=3).endswith("(47 more lines)")
