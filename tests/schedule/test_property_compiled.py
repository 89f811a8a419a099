"""Property test, compiled: random primitive sequences (the strategies of test_property.py) build
through lowering and gcc, and the kernel computes what the interpreter computes for the
unscheduled program.

Outputs are poisoned with NaN before the call, so an element the kernel skips fails the check.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tests.schedule.test_property import _loops, _random_step, workloads
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import For
from tilegraph.loop.visit import reduce_loop_of, walk_stmts

pytestmark = pytest.mark.needs_cc


def _annotate_for_codegen(data, sch: tg.Schedule) -> None:
    """Ask for the annotations the C backend lowers specially: vectorize an innermost loop
    (explicit vector statements), parallelise an outermost one (OpenMP), unroll another."""
    loops = _loops(sch.func)
    innermost = [lp for lp in loops if lp.kind == "serial" and not any(isinstance(s, For) for s in walk_stmts(lp.body))]
    outermost = [s for s in sch.func.body.stmts] if hasattr(sch.func.body, "stmts") else [sch.func.body]
    requests = []
    spatial = [lp for lp in innermost if not reduce_loop_of(lp)]
    if spatial:
        requests.append(("vectorize", data.draw(st.sampled_from(spatial)).var.name))
    if innermost:
        requests.append(("unroll", data.draw(st.sampled_from(innermost)).var.name))
    roots = [lp for lp in outermost if isinstance(lp, For) and lp.kind == "serial"]
    if roots:
        requests.append(("parallel", data.draw(st.sampled_from(roots)).var.name))
    for kind, loop in requests:
        if data.draw(st.booleans()):
            try:
                getattr(sch, kind)(loop)
            except tg.ScheduleError:
                pass  # e.g. a loop feeding a reduction cannot be parallel


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wl=workloads, data=st.data())
def test_random_schedules_compile_to_the_interpreted_result(wl, data):
    sch = tg.Schedule(wl)
    for _ in range(data.draw(st.integers(1, 6))):
        try:
            _random_step(data, sch)
        except tg.ScheduleError:
            pass  # refused requests change nothing (test_property.py checks that); keep going
    _annotate_for_codegen(data, sch)
    arrays = [np.random.default_rng(1).standard_normal(t.shape).astype("float32") for t in wl.inputs]
    want = interpret(wl, *arrays)
    kernel = tg.build(sch)
    (out_buffer,) = kernel.outputs
    got = np.full(out_buffer.shape, np.nan, out_buffer.dtype.numpy)
    kernel(*arrays, out=got)
    assert not np.isnan(got).any(), f"the kernel left elements unwritten\n{sch}"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"\n{sch}\n{kernel.source}")
