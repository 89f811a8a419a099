"""parallel, vectorize, unroll, bind: what each loop kind allows."""

import numpy as np
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


def test_a_reduction_loop_binds_to_threadidx_x_as_a_cross_thread_reduction():
    sch, (i, j, k) = _loops(k=64)
    ko, ki = sch.split(k, [None, 32])
    sch.reorder(i, j, ki, ko)
    sch.bind(ki, "threadIdx.x")
    assert "range(32) threadIdx.x" in str(sch)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 64)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    for order in ("lockstep", "serial", "random"):  # the meaning: the reduction over the lanes
        np.testing.assert_allclose(tg.interpret(sch, a, b, thread_order=order), a.astype(np.float64) @ b,
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis,split,message", [
    ("threadIdx.y", 32, "reduction loop"),            # only lanes of threadIdx.x combine by shuffles
    ("threadIdx.x", 48, "power of two"),              # 48 lanes: not a butterfly
    ("threadIdx.x", 64, "at most 32"),                # more than a warp
])
def test_cross_thread_reductions_are_refused_where_lanes_cannot_combine(axis, split, message):
    sch, (i, j, k) = _loops(k=192)
    ko, ki = sch.split(k, [None, split])
    sch.reorder(i, j, ki, ko)
    with pytest.raises(tg.ScheduleError, match=message):
        sch.bind(ki, axis)


def test_a_cross_thread_reduction_may_not_feed_spatial_loops():
    sch, (i, j, k) = _loops(k=32)
    sch.reorder(k, i, j)  # the thread loop would also run the spatial loops i and j
    with pytest.raises(tg.ScheduleError, match="spatial"):
        sch.bind(k, "threadIdx.x")
