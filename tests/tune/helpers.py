"""A tiny matmul and hand-written C kernels that misbehave, for tuning tests (test hooks only)."""

import numpy as np

import tilegraph as tg
from tilegraph import te

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
