"""Property test: random primitive sequences on random small workloads keep the program's meaning.

Each step draws a primitive and its arguments from the current IR. A request the primitive
refuses must raise ScheduleError and leave the schedule untouched; an accepted one must keep
interpret(scheduled) == interpret(unscheduled) and replay to the identical IR. At the end a set
of requests that are always illegal is checked to be refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import conv_with_pad, matmul
from tilegraph import te
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import For
from tilegraph.loop.visit import blocks, reduce_loop_of, walk_stmts
from tilegraph.schedule.primitives.nest import readers, stored_buffers

SIZES = st.sampled_from([1, 2, 3, 5, 7, 11, 13])


def _two_stage(m: int, n: int) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    y = te.compute((m, n), lambda i, j: x[i, j] * 2.0 + 1.0, name="Y")
    r = te.reduce_axis(n, "r")
    z = te.compute((m,), lambda i: te.sum(y[i, r], axis=r), name="Z")
    return tg.Workload([x], [z])


workloads = st.one_of(
    st.builds(matmul, SIZES, SIZES, SIZES),
    st.builds(_two_stage, SIZES, SIZES),
    st.builds(conv_with_pad, st.integers(1, 2), st.integers(2, 5), st.integers(2, 5), st.integers(1, 2)),
)
ACTIONS = ("split", "reorder", "fuse", "annotate", "cache_read", "cache_write", "compute_at", "compute_inline")


def _loops(func):
    return [s for s in walk_stmts(func.body) if isinstance(s, For)]


def _chain(lp: For) -> list[For]:
    """`lp` and the loops perfectly nested below it."""
    out = [lp]
    while isinstance(out[-1].body, For):
        out.append(out[-1].body)
    return out


def _intermediate_producers(func):
    allocs = {b.name for b in func.allocs}
    out = []
    for b in blocks(func.body):
        bufs = stored_buffers(b)
        if len(bufs) == 1 and bufs[0].name in allocs:
            out.append((b.name, bufs[0].name))
    return out


def _random_step(data, sch: tg.Schedule) -> None:
    func = sch.func
    action = data.draw(st.sampled_from(ACTIONS))
    loops = _loops(func)
    block_names = sch.block_names()
    if action == "split":
        lp = data.draw(st.sampled_from(loops))
        factor = data.draw(st.integers(1, lp.extent + 2))
        sch.split(lp.var.name, factor)
    elif action == "reorder":
        chain = _chain(data.draw(st.sampled_from(loops)))
        if len(chain) >= 2:
            names = [lp.var.name for lp in chain]
            sch.reorder(*data.draw(st.permutations(names)))
    elif action == "fuse":
        chain = _chain(data.draw(st.sampled_from(loops)))
        if len(chain) >= 2:
            sch.fuse(chain[0].var.name, chain[1].var.name)
    elif action == "annotate":
        lp = data.draw(st.sampled_from(loops))
        kind = data.draw(st.sampled_from(["parallel", "vectorize", "unroll"]))
        getattr(sch, kind)(lp.var.name)
    elif action == "cache_read":
        blk = data.draw(st.sampled_from(block_names))
        reads = [b.name for b in func.params if readers(func.body, b.name) and blk in readers(func.body, b.name)]
        if reads:
            copy = sch.cache_read(blk, data.draw(st.sampled_from(reads)), "local")
            consumer_loops = sch.loops(blk)
            if consumer_loops and data.draw(st.booleans()):
                sch.compute_at(copy, data.draw(st.sampled_from(consumer_loops)))
    elif action == "cache_write":
        out_name = sch.workload.outputs[0].name
        if out_name in block_names:
            wb = sch.cache_write(out_name, "local")
            producer_loops = sch.loops(out_name)
            if producer_loops and data.draw(st.booleans()):
                sch.reverse_compute_at(wb, data.draw(st.sampled_from(producer_loops)))
    elif action == "compute_at":
        producers = _intermediate_producers(func)
        if producers:
            blk, buf = data.draw(st.sampled_from(producers))
            consumer_loops = [lp for r in readers(func.body, buf) for lp in sch.loops(r)]
            if consumer_loops:
                sch.compute_at(blk, data.draw(st.sampled_from(consumer_loops)))
    elif action == "compute_inline":
        candidates = [b for b, _ in _intermediate_producers(func) if b in ("pad", "Y")]
        if candidates:
            sch.compute_inline(data.draw(st.sampled_from(candidates)))


def _refused_unchanged(sch: tg.Schedule, fn) -> None:
    before, n = sch.func, len(sch.trace.instructions)
    with pytest.raises(tg.ScheduleError):
        fn()
    assert sch.func == before and len(sch.trace.instructions) == n


def _check_illegal_requests(data, sch: tg.Schedule) -> None:
    func = sch.func
    loops = _loops(func)
    serial = [lp for lp in loops if lp.kind == "serial"]
    racing = [lp for lp in serial if reduce_loop_of(lp)]
    if racing:
        _refused_unchanged(sch, lambda: sch.parallel(data.draw(st.sampled_from(racing)).var.name))
    outer = [lp for lp in serial if any(isinstance(s, For) for s in walk_stmts(lp.body))]
    if outer:
        _refused_unchanged(sch, lambda: sch.vectorize(data.draw(st.sampled_from(outer)).var.name))
    if serial:
        _refused_unchanged(sch, lambda: sch.split(serial[0].var.name, 0))
    for blk, buf in _intermediate_producers(func):
        consumers = set(readers(func.body, buf))
        away = [lp for lp in loops if not consumers & {b.name for b in blocks(lp.body)}]
        if away:
            loop = data.draw(st.sampled_from(away)).var.name
            _refused_unchanged(sch, lambda b=blk, lp=loop: sch.compute_at(b, lp))
    out_name = sch.workload.outputs[0].name
    if out_name in sch.block_names():
        _refused_unchanged(sch, lambda: sch.compute_inline(out_name))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wl=workloads, data=st.data())
def test_random_schedules_keep_meaning_and_replay(wl, data):
    sch = tg.Schedule(wl)
    for _ in range(data.draw(st.integers(1, 6))):
        before, n = sch.func, len(sch.trace.instructions)
        try:
            _random_step(data, sch)
        except tg.ScheduleError:
            # a refused primitive changes nothing (earlier ones of the same step were accepted)
            assert len(sch.trace.instructions) >= n
            if len(sch.trace.instructions) == n:
                assert sch.func == before
    arrays = [np.random.default_rng(1).standard_normal(t.shape).astype("float32") for t in wl.inputs]
    got = interpret(sch, *arrays)
    want = interpret(wl, *arrays)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func
    _check_illegal_requests(data, sch)
