"""Importing tilegraph stays cheap: every worker process (construction, builders, runners) and every
CLI command pays it. ml_dtypes (~1.3 s) and scipy.special (~0.4 s) load only when a program needs
them: a bfloat16 graph tensor, the interpreter's erf."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("ml_dtypes", "scipy.special", "torch", "onnx", "onnxruntime", "lightgbm")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(done.stdout.split())


def test_import_tilegraph_loads_none_of_the_heavy_modules():
    assert _loaded_after("import tilegraph, tilegraph.lower.pipeline, tilegraph.codegen.c") == set()


@pytest.mark.parametrize("code, needed", [
    ("from tilegraph.graph.ir import TensorType; TensorType((2,), 'bfloat16'); import numpy; numpy.dtype('bfloat16')",
     "ml_dtypes"),
    ("import numpy, tilegraph.loop.interpret as i; i._call('erf', numpy.float32(0.5), numpy.dtype('float32'))",
     "scipy.special"),
])
def test_a_heavy_module_loads_when_a_program_needs_it(code, needed):
    pytest.importorskip(needed)  # ml_dtypes comes with the models extra, not the core
    assert needed in _loaded_after(code)
