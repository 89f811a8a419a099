"""A tiny matmul, hand-written C kernels that misbehave, and the builder that injects them into
tg.tune (TuneOptions.builder) the way any other Builder implementation would."""

import hashlib
import os
import subprocess

import numpy as np

import tilegraph as tg
from tilegraph import te
from tilegraph.config import cache_dir
from tilegraph.tune.builder import Builder, workload_args
from tilegraph.tune.kernel_loader import load_kernel
from tilegraph.tune.result import BuildResult

N = 8

GOOD_C = f"""
void tg_test_kernel(const float* A, const float* B, float* C) {{
  for (int i = 0; i < {N}; i++) for (int j = 0; j < {N}; j++) {{
    float s = 0.0f;
    for (int k = 0; k < {N}; k++) s += A[i*{N}+k] * B[k*{N}+j];
    C[i*{N}+j] = s;
  }}
}}
"""
SEGFAULT_C = "void tg_test_kernel(const float* A, const float* B, float* C) { *(volatile float*)0 = 1.0f; }"
HANG_C = "void tg_test_kernel(const float* A, const float* B, float* C) { volatile int go = 1; while (go) {} }"
WRONG_C = f"void tg_test_kernel(const float* A, const float* B, float* C) {{ for (int i = 0; i < {N * N}; i++) C[i] = 1.0f; }}"
PARTIAL_C = f"void tg_test_kernel(const float* A, const float* B, float* C) {{ for (int i = 1; i < {N * N}; i++) C[i] = 0; }}"
BROKEN_C = "void tg_test_kernel( {"


def matmul_workload(n: int = N) -> tg.Workload:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    r = te.reduce_axis(n, "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C", tag="matmul")
    return tg.Workload([a, b], [c])


def matmul_reference(wl, inputs):
    return [inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)]


ENTRY = "tg_test_kernel"


def compile_source(source: str) -> str:
    """Hand-written C -> a shared library, content-addressed under the cache dir."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    out_dir = cache_dir() / "tune_test_builds"
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"{digest}.so"
    if not lib.exists():
        src = out_dir / f"{digest}.{os.getpid()}.c"
        src.write_text(source)
        tmp = out_dir / f"{digest}.{os.getpid()}.so"
        proc = subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(tmp), str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"gcc failed: {proc.stderr.strip().splitlines()[:1]}")
        os.replace(tmp, lib)
    return str(lib)


class SourceBuilder(Builder):
    """Candidates whose meta carries {"source": C code} are that hand-written kernel (a "raw"
    BuildResult: one pointer per array); the others build as usual."""

    def build(self, inputs):
        results = [None] * len(inputs)
        scheduled = [n for n, inp in enumerate(inputs) if "source" not in inp.meta]
        for n, inp in enumerate(inputs):
            if "source" in inp.meta:
                results[n] = self._raw(inp.workload, inp.meta["source"])
        for n, built in zip(scheduled, super().build([inputs[n] for n in scheduled])):
            results[n] = built
        return results

    def kernel(self, workload, trace_json, meta=None):
        if meta and "source" in meta:
            return RawCallable(load_kernel(self._raw(workload, meta["source"])), workload_args(workload))
        return super().kernel(workload, trace_json, meta)

    @staticmethod
    def _raw(workload, source):
        try:
            lib = compile_source(source)
        except RuntimeError as e:
            return BuildResult(False, "build_error", str(e))
        return BuildResult(True, lib_path=lib, entry=ENTRY, source=source, args=workload_args(workload), loader="raw")


class RawCallable:
    """kernel(*inputs) for a raw kernel, as tg.tune returns kernels."""

    def __init__(self, loaded, args):
        self.loaded, self.args = loaded, args

    def __call__(self, *inputs):
        outs = [np.empty(a.shape, a.dtype) for a in self.args if a.is_output]
        launch = self.loaded.bind([np.ascontiguousarray(x) for x in inputs], outs)
        launch.run()
        got = launch.outputs()
        return got[0] if len(got) == 1 else got


def slow_good_c(seconds: float) -> str:
    """GOOD_C's product, then a busy wait of `seconds` on the monotonic clock: a correct kernel of
    a known, machine-independent latency."""
    return "#include <time.h>\n" + GOOD_C.replace("void tg_test_kernel", "static void product") + f"""
static double now_s(void) {{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }}
void tg_test_kernel(const float* A, const float* B, float* C) {{
  product(A, B, C);
  double end = now_s() + {seconds!r};
  while (now_s() < end) {{}}
}}
"""
