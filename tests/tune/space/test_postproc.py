"""The GPU sketches and the target's postprocessor: programs are replayable traces whose decisions
re-derive them, and a block wider than the target allows is refused before it is built."""

import random

import pytest

import tilegraph as tg
from tilegraph.errors import ScheduleError
from tilegraph.schedule import Schedule
from tilegraph.tune.space.postproc import check_for_target
from tilegraph.tune.space.program import mutate, recognise, sample
from tilegraph.tune.space.sketch import space_for

OPENCL = tg.Target("opencl", device_name="test", max_threads_per_block=256)


@pytest.mark.parametrize("spec", ["matmul:24,40,32", "conv2d_nchw:1,8,10,10,16,3,3,1,1", "softmax:5,33"])
def test_gpu_programs_replay_and_their_decisions_re_derive_them(spec):
    wl = tg.workloads.from_spec(spec)
    rng = random.Random(3)
    sketches = space_for(wl, OPENCL)
    made = 0
    for sketch in sketches:
        for _ in range(6):
            try:
                program = sample(wl, sketch, rng)
            except ScheduleError:
                continue  # a draw whose block or register tile is too large: refused by the sketch
            made += 1
            assert Schedule.replay(wl, program.trace_json).trace.to_json() == program.trace_json
            again = recognise(wl, program.trace_json, OPENCL)
            assert again is not None and again.sketch == sketch and again.decisions == program.decisions
            child = mutate(wl, program, rng)
            assert child is None or Schedule.replay(wl, child.trace_json) is not None
    assert made > 0


def test_a_block_wider_than_the_target_allows_is_refused():
    wl = tg.workloads.from_spec("matmul:64,32,64")  # A 64x32 . B 32x64
    # per spatial axis [grid, vthread, threads, c], the reduce axis [outer, rstep], shared, pad
    wide = sample(wl, "gpu_multi_level_tiling", random.Random(0), [[2, 1, 32, 1], [2, 1, 16, 2], [4, 8], 1, 0])
    narrow = sample(wl, "gpu_multi_level_tiling", random.Random(0), [[4, 1, 8, 2], [4, 1, 8, 2], [4, 8], 1, 0])
    assert (_threads(wide.func.body), _threads(narrow.func.body)) == (512, 64)
    ok, why = check_for_target(wide.func, OPENCL)
    assert not ok and "512 threads per block (the target allows 256)" in why
    assert check_for_target(narrow.func, OPENCL) == (True, "")
    assert check_for_target(wide.func, tg.Target("cpu")) == (True, "")  # no such limit on a CPU


def _threads(stmt):
    from tilegraph.loop.ir import For
    from tilegraph.loop.visit import stmt_children

    own = stmt.extent if isinstance(stmt, For) and stmt.kind.startswith("threadIdx") else 1
    return own * max((_threads(c) for c in stmt_children(stmt)), default=1)
