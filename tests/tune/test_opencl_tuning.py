"""Tuning for the OpenCL target: candidates are built, checked against numpy and timed in the runner."""

import dataclasses
import json

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.cli.main import main
from tilegraph.runtime.opencl import OpenCLKernel, available
from tilegraph.target import Target
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.builder import Builder
from tilegraph.tune.database import open_database
from tilegraph.tune.gensor.gpu_state import gpu_schedule
from tilegraph.tune.kernel_loader import GpuKernelSpec, load_kernel
from tilegraph.tune.measure import MeasureInput, MeasurePolicy
from tilegraph.tune.result import BuildResult
from tilegraph.tune.runner import Runner
from tilegraph.workloads import from_spec

pytestmark = [
    pytest.mark.needs_opencl,
    pytest.mark.extended,
    pytest.mark.skipif(not available(), reason="no OpenCL platform (pyopencl + PoCL)"),
    pytest.mark.filterwarnings("ignore::Warning"),  # PoCL's compiler chatter
]

FAST = MeasurePolicy(min_time_s=0.005, min_repeats=3, warmup=1, timeout_s=20.0)


def _opencl_records(db, wl):
    return db.records(wl.key, Target("opencl").fingerprint)


@pytest.mark.parametrize("spec", ["matmul:32,24,16", "softmax:8,33"])
def test_tune_opencl_returns_a_checked_kernel_and_records_opencl_fingerprint(tune_dirs, spec):
    wl = from_spec(spec)
    db = open_database(str(tune_dirs / "t.db"))
    result = tg.tune(wl, target="opencl", strategy="gensor", trials=3, db=db, progress=False, policy=FAST,
                     build_workers=2)
    assert isinstance(result.kernel, OpenCLKernel)
    assert result.measured == 3 and result.failed == 0, result.failures
    assert result.latency_s > 0 and result.gflops > 0

    records = _opencl_records(db, wl)
    assert len(records) == 3 and all(r.kind == "ok" and r.samples for r in records)
    assert min(r.latency_s for r in records) == pytest.approx(result.latency_s)
    assert not db.records(wl.key, Target("cpu").fingerprint)

    inputs = random_inputs(wl, 11)
    (ref,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(result.kernel(*inputs), ref, rtol=1e-4, atol=1e-5)


def _build_opencl(wl) -> BuildResult:
    with Builder(max_workers=1, target="opencl") as builder:
        (build,) = builder.build([MeasureInput(wl, gpu_schedule(wl).trace.to_json())])
    assert build.ok, build.message
    assert build.loader == "opencl" and isinstance(build.payload, GpuKernelSpec)
    return build


def _with_kernel_prefix(build: BuildResult, statement: str) -> BuildResult:
    """The same candidate with `statement` first in every kernel body."""
    spec = build.payload
    code = spec.source.code
    for entry in spec.source.kernels:
        head = code.index(f" {entry}(")
        brace = code.index(") {", head) + 2
        code = code[:brace + 1] + statement + code[brace + 1:]
    source = dataclasses.replace(spec.source, code=code)
    return dataclasses.replace(build, source=code, payload=dataclasses.replace(spec, source=source))


def test_runner_catches_unwritten_outputs_and_hangs_then_recovers(tune_dirs):
    wl = from_spec("matmul:32,24,16")
    good = _build_opencl(wl)
    skips_work = _with_kernel_prefix(good, "return;")
    hangs = _with_kernel_prefix(good, "for (volatile int go = 1; go;) {}")
    policy = dataclasses.replace(FAST, timeout_s=4.0)
    with Runner(policy, target="opencl") as runner:
        results = [runner.run(wl, b, seed=n) for n, b in enumerate([good, skips_work, hangs, good])]
        assert [r.kind for r in results] == ["ok", "wrong_answer", "timeout", "ok"], [r.message for r in results]
        assert "non-finite" in results[1].message
        assert runner.restarts == 1
    assert len(results[0].samples) >= policy.min_repeats and results[0].median > 0


def test_opencl_loader_rejects_arrays_of_the_wrong_size(tune_dirs):
    wl = from_spec("softmax:8,33")
    kernel = load_kernel(_build_opencl(wl))
    with pytest.raises(ValueError, match="expected 264 contiguous float32"):
        kernel.bind([np.zeros((8, 32), np.float32)], [np.zeros((8, 33), np.float32)])


def test_unknown_loader_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown kernel loader 'metal'"):
        load_kernel(BuildResult(True, loader="metal"))


def test_cli_tune_with_opencl_target(tune_dirs, capsys):
    db = str(tune_dirs / "cli.db")
    args = ["tune", "matmul:32,24,16", "--target", "opencl", "--trials", "2", "--db", db, "--json"]
    assert main(args) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["measured"] == 2 and row["failed"] == 0 and row["latency_s"] > 0
    assert len(_opencl_records(open_database(db), from_spec("matmul:32,24,16"))) == 2


@pytest.mark.parametrize("argv, needle", [
    (["tune", "matmul:8,8,8", "--target", "gpu"], "unknown target kind 'gpu'"),
    (["tune", "matmul:8,8,8", "--target", "opencl -bogus=1"], "unknown target option 'bogus'"),
    (["bench", "matmul:8,8,8", "--target", "opencl"], "only the default cpu target"),
])
def test_cli_bad_target_is_one_line_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


@pytest.mark.parametrize("strategy,trials", [("auto", 10), ("tlm", 4)])
def test_auto_and_tlm_tune_opencl_with_checked_kernels(tune_dirs, strategy, trials):
    """auto goes on past Gensor's picks into the GPU sketches; tlm writes GPU sketch programs with the
    shipped model (the GPU sketches are words of its language); both return checked kernels."""
    if strategy == "tlm":
        pytest.importorskip("torch")
    wl = from_spec("matmul:24,40,32")
    db = open_database(str(tune_dirs / f"{strategy}.db"))
    result = tg.tune(wl, target="opencl", strategy=strategy, trials=trials, db=db, progress=False, policy=FAST)
    assert isinstance(result.kernel, OpenCLKernel) and result.measured == trials
    inputs = random_inputs(wl, 5)
    (ref,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(result.kernel(*inputs), ref, rtol=1e-4, atol=1e-5)
    records = _opencl_records(db, wl)
    assert len(records) == trials
    by = [r.meta.get("strategy") for r in records]
    if strategy == "tlm":
        assert set(by) == {"tlm"}
    else:  # Gensor's picks first (how many is its walk's); the evolutionary search measures the rest
        assert set(by) <= {"gensor", "evolutionary"} and by.count("gensor") >= 1
        assert by.count("evolutionary") == trials - by.count("gensor")
