"""The GPU sketches' programs mean what their workloads mean: random programs of every GPU sketch,
lowered for the GPU and run on the interpreter in two thread orders, against float64 numpy."""

import random
import zlib

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import ScheduleError
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.space.postproc import check_for_target
from tilegraph.tune.space.program import recognise, sample
from tilegraph.tune.space.sketch import space_for

OPENCL = tg.Target("opencl")


def _programs(wl, sketch, count=3):
    rng = random.Random(zlib.crc32(f"{wl.key}{sketch}".encode()))
    out = []
    for _ in range(count * 4):
        try:
            program = sample(wl, sketch, rng)
        except ScheduleError:
            continue
        if check_for_target(program.func, OPENCL)[0]:  # as the search does: a block PoCL refuses is not built
            out.append(program)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("spec", ["softmax:6,70", "layer_norm:5,33", "sum:7,9", "softmax:3,5", "matmul:9,7,5"])
def test_every_gpu_sketch_program_is_correct(spec):
    wl = tg.workloads.from_spec(spec)
    inputs = random_inputs(wl, seed=3)
    refs = reference_outputs(wl, inputs)
    sketches = space_for(wl, OPENCL)
    assert ("gpu_rows" in sketches) == (not spec.startswith("matmul"))  # row operators get row kernels
    for sketch in sketches:
        programs = _programs(wl, sketch)
        assert programs, sketch
        for program in programs:
            lowered = lower_gpu(program.func, OPENCL).lowered
            for order in ("lockstep", "reversed"):
                got = tg.interpret(lowered, *inputs, thread_order=order)
                np.testing.assert_allclose(np.asarray(got).reshape(refs[0].shape), refs[0], rtol=1e-4, atol=1e-5,
                                           err_msg=f"{sketch} {program.decisions} {order}")
            again = recognise(wl, program.trace_json, OPENCL)  # a recorded program is its sketch's again
            assert again is not None and again.sketch == sketch and again.decisions == program.decisions


def test_row_kernel_decisions_are_bounded_by_the_workload():
    # 3 rows of 5 columns: at most 2 rows a block (1 or 2 of ROWS_PER_BLOCK are <= 3); 8 lanes cover a row
    wl = tg.workloads.from_spec("softmax:3,5")
    seen = {tuple(p.decisions) for p in _programs(wl, "gpu_rows", 12)}
    from tilegraph.schedule.gpu_rows import ROWS_PER_BLOCK

    assert all(ROWS_PER_BLOCK[r] <= 3 and lanes == 0 for r, lanes in seen)  # lanes candidates: (8,) only
