import pytest

from tests.tune.helpers import BROKEN_C, GOOD_C, SourceBuilder, matmul_workload
from tilegraph.schedule import Schedule
from tilegraph.tune.builder import Builder
from tilegraph.tune.measure import MeasureInput

pytestmark = pytest.mark.needs_cc


def test_builds_real_traces_and_turns_failures_into_results(tune_dirs):
    wl = matmul_workload()
    sch = Schedule(wl)
    i, j, k = sch.loops("C")
    sch.split(i, 4)
    illegal = '{"instructions": [{"kind": "parallel", "inputs": {"loop": "k"}, "outputs": []}], "version": 1, ' \
              f'"workload_key": "{wl.key}"}}'
    inputs = [
        MeasureInput(wl, sch.trace.to_json()),
        MeasureInput(wl, illegal),
        MeasureInput(wl, "{}", {"source": GOOD_C}),
        MeasureInput(wl, "{}", {"source": BROKEN_C}),
    ]
    with SourceBuilder(max_workers=2, timeout_s=60) as builder:
        real, bad_schedule, hand, broken = builder.build(inputs)
    assert real.ok and real.loader == "runtime" and real.lib_path.endswith(".so") and real.input_buffers
    assert not bad_schedule.ok and bad_schedule.error_kind == "build_error" and "ScheduleError" in bad_schedule.message
    assert hand.ok and hand.loader == "raw"
    assert not broken.ok and broken.error_kind == "build_error" and "gcc" in broken.message


def test_the_production_builder_builds_the_trace_whatever_the_meta_says(tune_dirs):
    wl = matmul_workload()
    trace = Schedule(wl).trace.to_json()
    with Builder(max_workers=1) as builder:
        (result,) = builder.build([MeasureInput(wl, trace, {"source": BROKEN_C, "source_override": BROKEN_C})])
        assert result.ok and result.loader == "runtime"
        kernel = builder.kernel(wl, trace, {"source": BROKEN_C})
    assert kernel.source != BROKEN_C and "tg_" in kernel.entry


def test_build_timeout(tune_dirs):
    wl = matmul_workload()
    with Builder(max_workers=1, timeout_s=0.001) as builder:
        (result,) = builder.build([MeasureInput(wl, Schedule(wl).trace.to_json())])
    assert not result.ok and result.error_kind == "build_timeout"
