import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul
from tilegraph.loop.visit import walk_stmts


def test_storage_pad_replaces_buffer_everywhere():
    wl = matmul(6, 5, 4)
    sch = tg.Schedule(wl)
    sch.cache_read("C", "B", "shared")
    sch.storage_pad("B_shared", [0, 1])
    buf = next(b for b in sch.func.allocs if b.name == "B_shared")
    assert buf.padding == (0, 1) and buf.storage_shape == (4, 6)
    stores = [s for s in walk_stmts(sch.func.body) if getattr(s, "buffer", None) is not None]
    assert all(s.buffer.padding == (0, 1) for s in stores if s.buffer.name == "B_shared")
    assert "padding=[0, 1]" in str(sch)
    assert_same_as_unscheduled(sch, inputs_for(wl))


@pytest.mark.parametrize(("buffer", "padding", "match"), [
    ("C", [0, 1], "parameter"),
    ("B_shared", [1], "needs 2 entries"),
    ("B_shared", [0, -1], "non-negative"),
    ("Z", [0, 1], "no intermediate buffer"),
])
def test_storage_pad_refusals(buffer, padding, match):
    sch = tg.Schedule(matmul(6, 5, 4))
    sch.cache_read("C", "B", "shared")
    with pytest.raises(tg.ScheduleError, match=match):
        sch.storage_pad(buffer, padding)
