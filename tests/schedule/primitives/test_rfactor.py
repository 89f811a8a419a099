import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import inputs_for, matmul
from tilegraph import te
from tilegraph.loop.interpret import interpret


def row_reduce(m: int, n: int, combiner: str = "sum", init: float | None = None, where: bool = False) -> tg.Workload:
    x = te.placeholder((m, n), name="X")
    k = te.reduce_axis(n, "k")
    builder = {"sum": te.sum, "max": te.max, "min": te.min}[combiner]
    cond = k.var.lt(n - 2) if where else None
    s = te.compute((m,), lambda i: builder(x[i, k] * 2.0, axis=k, init=init, where=cond), name="S")
    return tg.Workload([x], [s])


def full_reduce(b: int, m: int, n: int) -> tg.Workload:
    x = te.placeholder((b, m, n), name="X")
    i, j = te.reduce_axis(m, "i"), te.reduce_axis(n, "j")
    s = te.compute((b,), lambda bb: te.sum(x[bb, i, j] * x[bb, i, j], axis=(i, j)), name="S")
    return tg.Workload([x], [s])


def _check(sch: tg.Schedule, want: np.ndarray) -> None:
    args = inputs_for(sch.workload)
    got = interpret(sch, *args)
    assert not np.isnan(got).any(), "some output element was never written"
    np.testing.assert_allclose(got, want(*[a.astype(np.float64) for a in args]), rtol=1e-5, atol=1e-5)
    assert tg.Schedule.replay(sch.workload, sch.trace.to_json()).func == sch.func


@pytest.mark.parametrize("combiner", ["sum", "max", "min"])
@pytest.mark.parametrize(("n", "lanes"), [(10, 4), (13, 8), (3, 8), (16, 16)])
def test_rfactor_inner_part_of_a_split_row_reduction(combiner, n, lanes):
    sch = tg.Schedule(row_reduce(5, n, combiner))
    i, k = sch.loops("S")
    ko, ki = sch.split(k, lanes)
    rf = sch.rfactor("S", ki)
    assert rf == "S_rf" and sch.func.buffer("S_rf").shape == (5, lanes)
    sch.vectorize(ki)  # now a spatial axis of S_rf
    sch.parallel(i)
    numpy_fn = {"sum": np.sum, "max": np.max, "min": np.min}[combiner]
    _check(sch, lambda x: numpy_fn(x * 2.0, axis=1))


def test_rfactor_outer_part_and_the_original_init_applies_once():
    sch = tg.Schedule(row_reduce(4, 11, "sum", init=5.0))
    i, k = sch.loops("S")
    ko, ki = sch.split(k, 3)
    sch.rfactor("S", ko, scope="local")
    text = str(sch)
    assert "S_rf[v_i, v_k_0] = 0.0f" in text and "S[v_i] = 5.0f" in text
    _check(sch, lambda x: 5.0 + (x * 2.0).sum(axis=1))


def test_rfactor_keeps_the_where_condition_in_the_rf_block():
    sch = tg.Schedule(row_reduce(3, 9, "max", where=True))
    i, k = sch.loops("S")
    ko, ki = sch.split(k, 4)
    sch.rfactor("S", ki)
    wb_line = next(line for line in str(sch).splitlines() if "S[v_i] = max" in line)
    assert "S_rf" in wb_line
    _check(sch, lambda x: (x[:, :7] * 2.0).max(axis=1))


def test_rfactor_unsplit_loop_and_spatial_guards_stay_on_both_blocks():
    sch = tg.Schedule(row_reduce(7, 6, "sum"))
    i, k = sch.loops("S")
    io, ii = sch.split(i, 3)  # 9 > 7: a spatial guard
    sch.rfactor("S", k)
    wb = next(line for line in str(sch).splitlines() if "block S(" in line)
    assert "< 7" in wb
    _check(sch, lambda x: (x * 2.0).sum(axis=1))


def test_two_rfactors_parallelise_a_full_reduction():
    sch = tg.Schedule(full_reduce(1, 7, 37))
    b, i, j = sch.loops("S")
    ip, io = sch.split(i, [2, None])
    jo, ji = sch.split(j, 8)
    rf = sch.rfactor("S", ip)
    rf2 = sch.rfactor(rf, ji, scope="local")
    assert rf2 == "S_rf_rf" and sch.func.buffer(rf2).shape == (1, 2, 8)
    sch.parallel(ip)
    sch.vectorize(ji)
    _check(sch, lambda x: (x * x).sum(axis=(1, 2)))


def test_rfactor_under_matmul_spatial_loops_inside_the_reduction():
    wl = matmul(6, 5, 7)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    ko, ki = sch.split(k, 2)
    sch.reorder(i, ko, j, ki)
    sch.rfactor("C", ki)
    assert "for j_rf in range(5)" in str(sch)
    _check(sch, lambda a, b: a @ b)


@pytest.mark.needs_cc
@pytest.mark.parametrize("scope", ["global", "local"])
def test_rfactor_vectorized_compiles_and_matches(scope):
    wl = row_reduce(9, 1001, "max")
    sch = tg.Schedule(wl)
    i, k = sch.loops("S")
    ko, ki = sch.split(k, 16)
    sch.rfactor("S", ki, scope=scope)
    sch.vectorize(ki)
    sch.parallel(i)
    kernel = tg.build(sch, target="cpu")
    (x,) = inputs_for(wl)
    out = np.full((9,), np.nan, dtype=np.float32)
    kernel(x, out=(out,), num_threads=2)
    np.testing.assert_allclose(out, (x.astype(np.float64) * 2.0).max(axis=1), rtol=1e-6)


def test_rfactor_refusals():
    sch = tg.Schedule(matmul(4, 3, 6))
    i, j, k = sch.loops("C")
    before = sch.func
    with pytest.raises(tg.ScheduleError, match="does not drive a reduce variable"):
        sch.rfactor("C", j)
    with pytest.raises(tg.ScheduleError, match="unknown scope"):
        sch.rfactor("C", k, scope="texture")
    with pytest.raises(tg.ScheduleError, match="no loop named"):
        sch.rfactor("C", "nope")
    assert sch.func == before and len(sch.trace.instructions) == 0
    with pytest.raises(tg.ScheduleError, match="mixes reduce loops"):  # no loop feeding both kinds can arise
        sch.fuse(j, k)

    sch = tg.Schedule(matmul(4, 3, 6))
    copy = sch.cache_read("C", "A")
    with pytest.raises(tg.ScheduleError, match="does not enclose"):
        sch.rfactor("C", sch.loops(copy)[0])
    with pytest.raises(tg.ScheduleError, match="not a sum/max/min reduction"):
        sch.rfactor(copy, sch.loops(copy)[0])

    x = te.placeholder((4, 5), name="X")
    k = te.reduce_axis(5, "k")
    s = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="S")
    t = te.compute((4,), lambda i: s[i] + 1.0, name="T")
    sch = tg.Schedule(tg.Workload([x], [t]))
    with pytest.raises(tg.ScheduleError, match="not a sum/max/min reduction"):
        sch.rfactor("T", sch.loops("T")[0])
