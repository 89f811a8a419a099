"""The GEMM micro-kernel schedule chain (packed B panel, register tile, vectorised 16-wide j)."""

import numpy as np

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul
from tilegraph.loop.interpret import interpret
from tilegraph.lower.passes import compact_buffers


def microkernel_schedule(wl):
    sch = tg.Schedule(wl)
    i, j, k = sch.loops("C")
    io, ii = sch.split(i, 6)
    jo, ji = sch.split(j, 32)
    ko, ki = sch.split(k, 256)
    jm, jv = sch.split(ji, 16)
    sch.reorder(io, jo, ko, ii, ki, jm, jv)
    packed = sch.cache_read("C", "B", "global", layout={"split": [[1, 16]], "order": [1, 0, 2]})
    sch.compute_at(packed, ko)
    wb = sch.cache_write("C", "local")
    sch.reverse_compute_at(wb, jo)
    sch.vectorize(jv)
    sch.unroll(ii)
    return sch


def test_gemm_microkernel_chain_interprets_correctly():
    wl = matmul(37, 64, 50)
    sch = microkernel_schedule(wl)
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


def test_gemm_microkernel_compacts_to_small_tiles():
    wl = matmul(37, 64, 50)
    sch = microkernel_schedule(wl)
    compact = compact_buffers.run(sch.func)
    text = str(tg.Schedule(wl, func=compact))
    assert not compact.allocs
    assert "allocate C_local: float32[6, 32] scope=local" in text
    assert "allocate B_global: float32[2, 50, 16] scope=global" in text
    a, b = inputs_for(wl)
    got = interpret(compact, a, b, outputs=1)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
