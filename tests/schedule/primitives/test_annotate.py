"""parallel, vectorize, unroll, bind: what each loop kind allows."""

import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import matmul


def _loops(m=8, n=16, k=4):
    sch = tg.Schedule(matmul(m, n, k))
    return sch, sch.loops("C")


def test_annotations_set_the_loop_kind():
    sch, (i, j, k) = _loops()
    sch.reorder(i, k, j)
    sch.parallel(i)
    sch.unroll(k)
    sch.vectorize(j)
    text = str(sch)
    assert "range(8) parallel" in text and "range(16) vectorized" in text and "range(4) unrolled" in text


def test_a_reduction_loop_cannot_run_in_parallel():
    sch, (_, _, k) = _loops()
    with pytest.raises(tg.ScheduleError, match="reduction loop"):
        sch.parallel(k)


def test_vectorize_needs_an_innermost_loop_and_a_loop_is_annotated_once():
    sch, (i, j, _) = _loops()
    with pytest.raises(tg.ScheduleError):
        sch.vectorize(i)
    sch.unroll(j)
    with pytest.raises(tg.ScheduleError, match="already unrolled"):
        sch.parallel(j)


def test_bind_accepts_gpu_axes_only():
    sch, (i, j, _) = _loops()
    sch.bind(i, "blockIdx.x")
    assert "blockIdx.x" in str(sch)
    with pytest.raises(tg.ScheduleError, match="unknown thread axis"):
        sch.bind(j, "warp.x")
