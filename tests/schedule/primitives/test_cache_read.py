import numpy as np
import pytest

import tilegraph as tg
from tests.schedule.primitives.prim_workloads import assert_same_as_unscheduled, inputs_for, matmul


def test_cache_read_plain_copy_only_consumer_reads_it():
    wl = matmul(13, 11, 7)
    sch = tg.Schedule(wl)
    blk = sch.cache_read("C", "A", "local")
    assert blk == "A_local"
    text = str(sch)
    assert "alloc A_local: float32[13, 7] scope=local" in text
    assert "A_local[v_i, v_k]" in text and text.index("block A_local") < text.index("block C(")
    assert_same_as_unscheduled(sch, inputs_for(wl))


def test_cache_read_packed_layout_rewrites_loads():
    wl = matmul(13, 32, 7)
    sch = tg.Schedule(wl)
    sch.cache_read("C", "B", "global", layout={"split": [[1, 16]], "order": [1, 0, 2]})
    text = str(sch)
    assert "alloc B_global: float32[2, 7, 16] scope=global" in text
    assert "B_global[(v_j // 16), v_k, (v_j % 16)]" in text
    assert "B[v1, ((v0 * 16) + v2)]" in text
    a, b = inputs_for(wl)
    assert_same_as_unscheduled(sch, [a, b], a.astype(np.float64) @ b.astype(np.float64))


def test_cache_read_names_are_fresh_and_replay():
    wl = matmul(5, 4, 3)
    sch = tg.Schedule(wl)
    sch.cache_read("C", "A", "local")
    sch.cache_read("C", "A_local", "local")
    assert "A_local_local" in sch.block_names()
    assert tg.Schedule.replay(wl, sch.trace.to_json()).func == sch.func


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"buffer": "Q"}, "no buffer named"),
    ({"buffer": "C"}, "also writes"),
    ({"buffer": "A", "scope": "texture"}, "unknown scope"),
    ({"buffer": "B", "layout": {"split": [[1, 3]]}}, "does not divide"),
    ({"buffer": "B", "layout": {"order": [0, 0]}}, "not a permutation"),
    ({"buffer": "B", "layout": {"split": [[5, 2]]}}, "out of range"),
])
def test_cache_read_refuses_bad_requests(kwargs, match):
    sch = tg.Schedule(matmul(5, 4, 3))
    before = sch.func
    with pytest.raises(tg.ScheduleError, match=match):
        sch.cache_read("C", **kwargs)
    assert sch.func == before and not sch.trace.instructions
