from dataclasses import replace

import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul
from tilegraph import te
from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import Block
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.expr import BinOp, Const


def test_decompose_reduction_before_reduce_loop():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    sch.reorder(i, k, j)
    init = sch.decompose_reduction("C", k)
    assert init == "C_init"
    text = str(sch)
    assert "for j_init in range(11)" in text and "init:" not in text
    assert text.index("block C_init") < text.index("for k in range(7)")
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


def test_decompose_reduction_drops_reduce_guards_keeps_spatial_guards():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    io, ii = sch.split(i, 4)
    ko, ki = sch.split(k, 3)
    sch.reorder(io, ko, ii, j, ki)
    sch.decompose_reduction("C", ko)
    text = str(sch)
    init_line = next(line for line in text.splitlines() if "block C_init" in line)
    assert "< 13" in init_line and "< 7" not in init_line
    assert_same_as_unscheduled(sch, inputs_for(wl))


def test_decompose_reduction_refusals():
    sch = tg.Schedule(matmul(5, 4, 3))
    i, j, k = sch.loops("C")
    ko, ki = sch.split(k, 1)
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="drives a reduce variable"):
        sch.decompose_reduction("C", ki)  # ko, above ki, is a reduction loop
    assert sch.func == before
    copy = sch.cache_read("C", "A")
    with pytest.raises(tg.ScheduleError, match="does not enclose"):
        sch.decompose_reduction("C", sch.loops(copy)[0])
    sch.decompose_reduction("C", i)
    with pytest.raises(tg.ScheduleError, match="no init"):
        sch.decompose_reduction("C", i)


def _reversed_sum(n=6):
    """S[0] = sum over k of A[5 - k]: the reduce variable runs backwards, so the init (which runs
    where v_k == 0) comes at the last step of the loop."""

    a = te.placeholder((n,), name="A")
    k = te.reduce_axis(n, "k")
    wl = tg.Workload([a], [te.compute((1,), lambda i: te.sum(a[k], axis=k), name="S")])
    sch = tg.Schedule(wl)
    blk = next(s for s in walk_stmts(sch.func.body) if isinstance(s, Block))
    reversed_binding = BinOp("sub", Const(n - 1), blk.bindings[1])
    sch.func = replace_node(sch.func, blk, replace(blk, bindings=(blk.bindings[0], reversed_binding)))
    return wl, sch


def test_decompose_reduction_refuses_a_reduce_variable_that_runs_backwards():
    wl, sch = _reversed_sum()
    with pytest.raises(tg.ScheduleError, match="does not grow with loop k"):
        sch.decompose_reduction("S", sch.loops("S")[-1])
    x = np.arange(6, dtype=np.float32)
    kernel = tg.build(sch, "cpu -isa=avx2")  # lowering keeps the init under its guard
    np.testing.assert_array_equal(kernel(x), tg.interpret(sch, x))


def test_decompose_reduction_refuses_when_another_block_under_the_loop_uses_the_output():

    a = te.placeholder((4, 5), name="A")
    k = te.reduce_axis(5, "k")
    s = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")
    t = te.compute((4,), lambda i: s[i] * 2.0, name="T")
    wl = tg.Workload([a], [s, t])
    sch = tg.Schedule(wl)
    i = sch.loops("S")[0]
    sch.reverse_compute_at("T", i)
    with pytest.raises(tg.ScheduleError, match="block T under i uses S"):
        sch.decompose_reduction("S", i)
