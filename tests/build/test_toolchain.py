"""build/toolchain.py: compilers found or explained, failures and hangs turned into data."""

import sys
import time

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


def test_a_timeout_stops_the_compilers_children_too(tmp_path):
    """gcc is a driver that runs cc1: a hang is in the child, and killing the driver alone left it
    compiling (a core taken from every later measurement)."""
    pid_file = tmp_path / "child.pid"
    driver = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
              "time.sleep(60)\n")
    with pytest.raises(CompilerFailed, match="timed out"):
        run_compiler([sys.executable, "-c", driver], timeout=1.0)
    child = int(pid_file.read_text())
    deadline = time.time() + 5
    while _alive(child) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the compiler's child outlived its timeout"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
