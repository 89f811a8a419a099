"""Differential fuzz of random schedules on random small workloads: the interpreter on the
unscheduled program, the interpreter on the scheduled one, the compiled C kernel (outputs
poisoned with NaN first) and the OpenCL kernel on PoCL must agree.

The default run checks a few hundred cases (test_property*.py in tests/schedule add more); the
slow run checks FUZZ_EXAMPLES (default 10,000; `TILEGRAPH_FUZZ_EXAMPLES=N` changes it):

    python -m pytest -m slow tests/reliability/test_schedule_fuzz.py -p no:cacheprovider
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import conv_with_pad, matmul, matmul_relu
from tests.schedule.test_property import _random_step
from tests.schedule.test_property_compiled import _annotate_for_codegen
from tilegraph import ops, te
from tilegraph.dtype import poisoned
from tilegraph.errors import LoweringError, ScheduleError
from tilegraph.loop.interpret import interpret

pytestmark = pytest.mark.needs_cc
SIZES = st.sampled_from([1, 2, 3, 5, 7, 11, 13, 17])
FUZZ_EXAMPLES = int(os.environ.get("TILEGRAPH_FUZZ_EXAMPLES", "10000"))
COUNTS: dict[str, int] = {"cases": 0, "c": 0, "opencl": 0, "opencl_refused": 0}


def _softmax(m: int, n: int) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    return tg.Workload([x], [ops.softmax(x)])


def _layer_norm(m: int, n: int) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    g, b = te.placeholder((n,), name="G"), te.placeholder((n,), name="B")
    return tg.Workload([x, g, b], [ops.layer_norm(x, g, b)])


def _two_stage(m: int, n: int) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    y = te.compute((m, n), lambda i, j: x[i, j] * 2.0 + 1.0, name="Y")
    r = te.reduce_axis(n, "r")
    return tg.Workload([x], [te.compute((m,), lambda i: te.max(y[i, r], axis=r), name="Z")])


def _transpose_add(m: int, n: int) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    y = te.placeholder((n, m), name="Yin")
    return tg.Workload([x, y], [te.compute((m, n), lambda i, j: x[i, j] + y[j, i] * 0.5, name="T")])


def _bfloat16_matmul(m: int, n: int, k: int) -> tg.Workload:
    """bfloat16 operands and result, float32 accumulation (the shape of a bf16 model's GEMM)."""
    a = te.placeholder((m, k), "bfloat16", name="A")
    b = te.placeholder((k, n), "bfloat16", name="B")
    c = ops.matmul(a, b, accumulate="float32")
    return tg.Workload([a, b], [te.compute((m, n), lambda i, j: te.cast("bfloat16", te.max_(c[i, j], 0.0)), name="D")])


def _array(t: te.Tensor, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(t.shape).astype("float32").astype(t.dtype.array_numpy)


def _close(got: np.ndarray, want: np.ndarray, msg: str) -> None:
    """float32 results within 1e-4; bfloat16 ones within two of their units in the last place (one
    float32 rounding of the accumulation can move a result across a bfloat16 rounding boundary)."""
    tol = 2 ** -7 if want.dtype.name == "bfloat16" else 1e-4
    np.testing.assert_allclose(got.astype("float32"), want.astype("float32"), rtol=tol, atol=tol, err_msg=msg)


WORKLOADS = st.one_of(
    st.builds(matmul, SIZES, SIZES, SIZES),
    st.builds(matmul_relu, SIZES, SIZES, SIZES),
    st.builds(_two_stage, SIZES, SIZES),
    st.builds(_softmax, SIZES, SIZES),
    st.builds(_layer_norm, SIZES, SIZES),
    st.builds(_transpose_add, SIZES, SIZES),
    st.builds(_bfloat16_matmul, SIZES, SIZES, SIZES),
    st.builds(conv_with_pad, st.integers(1, 3), st.integers(2, 6), st.integers(2, 6), st.integers(1, 3)),
)


def _opencl_kernel(sch: tg.Schedule):  # noqa: ANN202
    """The OpenCL kernel of the schedule, or None where the GPU lowering refuses it (a CPU-only
    annotation, say): the refusal must be a clear LoweringError/ScheduleError, never a crash."""
    from tilegraph.runtime.opencl import available

    if not available():
        return None
    try:
        return tg.build(sch, target="opencl")
    except (LoweringError, ScheduleError):
        return None


def check_case(wl: tg.Workload, data) -> None:  # noqa: ANN001
    sch = tg.Schedule(wl)
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        try:
            _random_step(data, sch)
        except ScheduleError:
            pass  # a refused request changes nothing (tests/schedule/test_property.py checks that)
    gpu_sch = tg.Schedule.replay(wl, sch.trace)  # before the CPU annotations below
    _annotate_for_codegen(data, sch)
    seed = data.draw(st.integers(0, 2**16), label="seed")
    arrays = [_array(t, seed) for t in wl.inputs]
    if "G" in {t.name for t in wl.inputs}:
        arrays = [a if t.name != "X" else a * 100 + 50 for a, t in zip(arrays, wl.inputs)]  # offset rows
    meaning = interpret(wl, *arrays)
    scheduled = interpret(sch, *arrays)
    _close(scheduled, meaning, f"interpreter\n{sch}")
    kernel = tg.build(sch)
    (out_buffer,) = kernel.outputs
    got = poisoned(out_buffer.shape, out_buffer.dtype.numpy).view(out_buffer.dtype.array_numpy)
    kernel(*arrays, out=got)
    _close(got, scheduled, f"C\n{sch}\n{kernel.source}")
    COUNTS["cases"] += 1
    COUNTS["c"] += 1
    cl = _opencl_kernel(gpu_sch)
    if cl is None:
        COUNTS["opencl_refused"] += 1
    else:
        _close(cl(*arrays), scheduled, f"OpenCL\n{gpu_sch}")
        COUNTS["opencl"] += 1


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(wl=WORKLOADS, data=st.data())
def test_random_schedules_agree_on_every_backend(wl, data):
    check_case(wl, data)


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(wl=WORKLOADS, data=st.data())
def test_random_schedules_agree_on_every_backend_long(wl, data):
    check_case(wl, data)
    report = os.environ.get("TILEGRAPH_FUZZ_REPORT")
    if report and COUNTS["cases"] % 100 == 0:
        with open(report, "w") as f:
            f.write(f"{COUNTS}\n")
