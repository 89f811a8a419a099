"""check_printable: the last CPU pass refuses what the C printer cannot print, with a clear error."""

import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.lower.pipeline import lower

CPU = tg.Target("cpu", isa="avx2")


def _elementwise():
    x = te.placeholder((8,), name="X")
    return tg.Schedule(tg.Workload([x], [te.compute((8,), lambda i: x[i] * 2.0, name="Y")]))


def test_a_gpu_bound_loop_is_refused_for_a_cpu_target():
    sch = _elementwise()
    sch.bind(sch.loops("Y")[0], "threadIdx.x")
    with pytest.raises(tg.LoweringError, match="bound to threadIdx.x, which a CPU target cannot run"):
        lower(sch.func, CPU)


def test_a_printable_func_passes_unchanged_through_the_check():
    from tilegraph.lower.passes import check_printable

    func = lower(_elementwise().func, CPU)
    assert check_printable.run(func, CPU) is func
