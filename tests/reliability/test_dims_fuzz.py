"""Differential fuzz of random schedules on random small workloads with run-time dims (te/dims.py):
at random values of the dims, the interpreter on the unscheduled program, the interpreter on the
scheduled one, the C kernel (outputs poisoned first) and the OpenCL kernel on PoCL agree on every
element below the run-time extents, with every input element past them poisoned (NaN). Lowering's
skipped iterations and relaxed guards (lower/passes/skip_past_dims.py, relax_dims_guards.py) are
what this exercises beyond tests/reliability/test_schedule_fuzz.py. Buckets (`Workload.at`) too.

    TILEGRAPH_FUZZ_EXAMPLES=2000 python -m pytest -m slow tests/reliability/test_dims_fuzz.py -p no:cacheprovider
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tests.reliability.test_schedule_fuzz import FUZZ_EXAMPLES, _opencl_kernel
from tests.schedule.test_property import _random_step
from tests.schedule.test_property_compiled import _annotate_for_codegen
from tilegraph import ops, te
from tilegraph.dtype import poisoned
from tilegraph.errors import ScheduleError
from tilegraph.loop.interpret import interpret
from tilegraph.te.dims import dim, dims_array, value_of

pytestmark = pytest.mark.needs_cc
SIZES = st.sampled_from([1, 2, 3, 5, 7, 11, 13, 17])


def _matmul(m: int, n: int, k: int) -> tg.Workload:
    """m and k run-time: a row bound and a reduction bound."""
    mm, kk = dim("m", m), dim("k", k)
    a, b = te.placeholder((mm, kk), name="A"), te.placeholder((kk, n), name="B")
    r = te.reduce_axis(kk, "r")
    return tg.Workload([a, b], [te.compute((mm, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")])


def _softmax(m: int, n: int) -> tg.Workload:
    """Rows and the softmax axis both run-time."""
    x = te.placeholder((dim("m", m), dim("n", n)), name="X")
    return tg.Workload([x], [ops.softmax(x)])


def _layer_norm_gelu(m: int, n: int) -> tg.Workload:
    x = te.placeholder((dim("m", m), n), name="X")
    g, b = te.placeholder((n,), name="G"), te.placeholder((n,), name="Bn")
    return tg.Workload([x, g, b], [ops.gelu(ops.layer_norm(x, g, b))])


def _mean_of_transpose(m: int, n: int) -> tg.Workload:
    """A reduction over a run-time axis after a transpose, with its run-time divisor."""
    x = te.placeholder((dim("m", m), n), name="X")
    return tg.Workload([x], [ops.mean(ops.transpose(x, (1, 0)), axis=1)])


WORKLOADS = st.one_of(
    st.builds(_matmul, SIZES, SIZES, SIZES),
    st.builds(_softmax, SIZES, SIZES),
    st.builds(_layer_norm_gelu, SIZES, SIZES),
    st.builds(_mean_of_transpose, SIZES, SIZES),
)


def _inputs(wl: tg.Workload, values: dict[str, int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for t in wl.inputs:
        if t is wl.dims_input:
            arrays.append(dims_array(wl.dims, values))
            continue
        a = rng.standard_normal(t.shape).astype(np.float32)
        if t.bounds:
            valid = tuple(slice(0, s if b is None else value_of(b, values)) for s, b in zip(t.shape, t.bounds))
            poisoned_tail = np.full(t.shape, np.nan, np.float32)
            poisoned_tail[valid] = a[valid]
            a = poisoned_tail
        arrays.append(a)
    return arrays


def _region(wl: tg.Workload, values: dict[str, int]) -> tuple[slice, ...]:
    (out,) = wl.outputs
    return tuple(slice(0, s if b is None else value_of(b, values)) for s, b in zip(out.shape, out.bounds or (None,) * out.ndim))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(wl=WORKLOADS, data=st.data())
def test_random_schedules_agree_below_the_run_time_extents(wl, data):
    check_case(wl, data)


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(wl=WORKLOADS, data=st.data())
def test_random_schedules_agree_below_the_run_time_extents_long(wl, data):
    check_case(wl, data)


def check_case(wl: tg.Workload, data) -> None:  # noqa: ANN001
    bucket = data.draw(st.booleans(), label="bucket")
    if bucket:  # a bucket's workload: loops to a smaller upper bound, the same arrays
        wl = wl.at({d.name: data.draw(st.integers(d.lower, d.upper), label=f"bucket {d.name}") for d in wl.dims})
    limits = wl.tuning_dims
    values = {d.name: data.draw(st.integers(d.lower, limits[d.name]), label=d.name) for d in wl.dims}
    sch = tg.Schedule(wl)
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        try:
            _random_step(data, sch)
        except ScheduleError:
            pass
    gpu_sch = tg.Schedule.replay(wl, sch.trace)
    _annotate_for_codegen(data, sch)
    arrays = _inputs(wl, values, data.draw(st.integers(0, 2**16), label="seed"))
    region = _region(wl, values)
    meaning = interpret(wl, *arrays)[region]
    assert np.isfinite(meaning).all()
    np.testing.assert_allclose(interpret(sch, *arrays)[region], meaning, rtol=1e-4, atol=1e-4,
                               err_msg=f"interpreter {values}\n{sch}")
    kernel = tg.build(sch)
    (out_buffer,) = kernel.outputs
    got = poisoned(out_buffer.shape, out_buffer.dtype.numpy)
    kernel(*arrays, out=got)
    np.testing.assert_allclose(got[region], meaning, rtol=1e-4, atol=1e-4, err_msg=f"C {values}\n{sch}")
    cl = _opencl_kernel(gpu_sch)
    if cl is not None:
        np.testing.assert_allclose(cl(*arrays)[region], meaning, rtol=1e-4, atol=1e-4,
                                   err_msg=f"OpenCL {values}\n{gpu_sch}")
