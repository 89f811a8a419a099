"""C kernels with run-time dims: one kernel per workload serves every extent of its range, default
and tuned schedules alike, against the float64 reference and the interpreter (cases and poisoning:
tests/loop/test_dims.py)."""

import numpy as np
import pytest

import tilegraph as tg
from tests.loop.test_dims import EXTENTS, WORKLOADS, cases
from tilegraph.te.dims import dims_array

pytestmark = pytest.mark.needs_cc


def _check(kernel, wl, name):
    for values in EXTENTS[name]:
        inputs, ref, valid = cases(name, values)
        dims = dims_array(wl.dims, values)
        region = tuple(slice(0, v) for v in valid)
        out = kernel(*inputs, dims)[region]
        assert np.isfinite(out).all(), (name, values)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=f"{name} {values}")
        np.testing.assert_allclose(out, tg.interpret(wl, *inputs, dims)[region], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_one_default_kernel_serves_the_whole_range(name):
    wl = WORKLOADS[name]()
    _check(tg.build(wl), wl, name)


# (the gather's raw indices are not tunable: random inputs put them outside its table, dims or not)
@pytest.mark.parametrize("name, strategy", [("matmul", "gensor"), ("attention", "auto"), ("matmul", "random")])
def test_tuned_at_the_upper_bound_and_right_at_every_extent(name, strategy, tmp_path):
    wl = WORKLOADS[name]()
    result = tg.tune(wl, strategy=strategy, trials=6, db=tmp_path / "db.sqlite", progress=False, seed=0)
    assert result.measured > 0 and result.trace.names[:len(wl.inputs)][-1] == "tg_dims"
    _check(result.kernel, wl, name)
    again = tg.build(wl, db=tmp_path / "db.sqlite")  # the record is found for the same workload
    _check(again, wl, name)


def test_dims_out_of_range_are_refused_before_the_call():
    wl = WORKLOADS["gather"]()
    kernel = tg.build(wl)
    inputs, _, _ = cases("gather", {"n": 3})
    for bad in (0, 25):
        with pytest.raises(ValueError, match="outside its range"):
            kernel(*inputs, np.array([bad], np.int32))


@pytest.mark.parametrize("name", ["matmul", "attention"])
def test_sampled_schedules_of_every_sketch_are_right_at_every_extent(name):
    """The design space's programs (tiles that do and do not divide the upper bounds, packing,
    caches, parallel and vector loops) keep the meaning at every extent: lowering's skipping and
    relaxed guards included."""
    import random

    from tilegraph.errors import ScheduleError
    from tilegraph.schedule import Schedule
    from tilegraph.target import Target
    from tilegraph.tune.space.program import sample
    from tilegraph.tune.space.sketch import space_for

    wl = WORKLOADS[name]()
    rng = random.Random(7)
    built = 0
    for sketch in space_for(wl, Target("cpu")):
        for _ in range(5):
            try:
                program = sample(wl, sketch, rng)
            except ScheduleError:
                continue
            _check(tg.build(Schedule.replay(wl, program.trace_json)), wl, name)
            built += 1
    assert built >= 3


def test_a_bucket_is_its_own_workload_with_the_same_arrays():
    from tilegraph.errors import WorkloadError

    wl = WORKLOADS["matmul"]()
    small = wl.at({"m": 8})
    assert small.key != wl.key and small.tuning_dims == {"k": 12, "m": 8} and wl.at({"m": 24}).key == wl.key
    assert [t.shape for t in small.inputs] == [t.shape for t in wl.inputs]  # storage: the range's upper bound
    assert small.flops() == 2 * 8 * 12 * 5
    with pytest.raises(WorkloadError, match="outside its range"):
        wl.at({"m": 25})
    with pytest.raises(WorkloadError, match="not dims"):
        wl.at({"seq": 3})
    kernel = tg.build(small)  # loops for m <= 8 only: a larger m is refused, never half computed
    inputs, ref, _ = cases("matmul", {"m": 8, "k": 5})
    np.testing.assert_allclose(kernel(*inputs, dims_array(wl.dims, {"m": 8, "k": 5}))[:8], ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="upper bound of this kernel's bucket"):
        kernel(*inputs, dims_array(wl.dims, {"m": 9, "k": 5}))


def test_tune_buckets_dispatches_every_size_to_its_bucket(tmp_path):
    wl = WORKLOADS["matmul"]()
    kernel = tg.tune_buckets(wl, "m", uppers=[1, 8], strategy="gensor", trials=9, db=tmp_path / "db.sqlite",
                             progress=False)
    assert kernel.ranges == ((1, 1), (2, 8), (9, 24))
    assert len({r.workload_key for r in kernel.results}) == 3 and all(r.measured for r in kernel.results)
    for m, bucket in ((1, 0), (2, 1), (8, 1), (9, 2), (24, 2)):
        values = {"m": m, "k": 7}
        inputs, ref, _ = cases("matmul", values)
        dims = dims_array(wl.dims, values)
        assert kernel.kernel_for(dims) is kernel.kernels[bucket]
        np.testing.assert_allclose(kernel(*inputs, dims)[:m], ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="outside its range"):
        kernel.kernel_for(np.array([7, 25], np.int32))


@pytest.mark.needs_opencl
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_opencl_kernels_take_run_time_dims_too(name):
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import available

    if not available():
        pytest.skip("no OpenCL device")
    wl = WORKLOADS[name]()
    _check(tg.build(wl, target="opencl"), wl, name)


def test_the_native_dispatcher_reads_the_value_at_every_run():
    """Bound once, the launch serves each value later written into its dims array: a wrong bucket
    (the [1, 1] kernel for m = 24) would leave rows unwritten (poisoned)."""
    from tilegraph.dtype import poisoned
    from tilegraph.runtime.buckets import BucketedKernel

    wl = WORKLOADS["matmul"]()
    ranges = ((1, 1), (2, 8), (9, 24))
    kernel = BucketedKernel(wl.dims, "m", ranges, [tg.build(wl.at({"m": hi})) for _, hi in ranges])
    inputs, _, _ = cases("matmul", {"m": 24, "k": 12})
    dims = dims_array(wl.dims, {"m": 1, "k": 12})
    out = poisoned((24, 5), np.float32)
    launch = kernel.bind([*inputs, dims], [out], 2)
    assert launch.function is kernel._native  # one native entry point, not a Python choice
    for m in (1, 24, 5, 9, 2):
        dims[:] = dims_array(wl.dims, {"m": m, "k": 12})
        out[:] = np.nan
        launch.run()
        ref = inputs[0][:m].astype(np.float64) @ inputs[1].astype(np.float64)
        np.testing.assert_allclose(out[:m], ref, rtol=1e-4, atol=1e-4, err_msg=f"m={m}")


@pytest.mark.needs_opencl
def test_opencl_tuning_of_a_bucket_checks_its_run_time_extents_only(tmp_path):
    """A GPU kernel's outputs come back flat: the re-check reshapes them to their storage before
    cutting them to the run-time extents the references cover."""
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import available

    if not available():
        pytest.skip("no OpenCL device")
    wl = WORKLOADS["matmul"]().at({"m": 8})
    result = tg.tune(wl, target="opencl", strategy="random", trials=3, db=tmp_path / "db.sqlite", progress=False)
    assert result.measured > 0
    inputs, ref, _ = cases("matmul", {"m": 8, "k": 12})
    np.testing.assert_allclose(result.kernel(*inputs, dims_array(wl.dims, {"m": 8, "k": 12}))[:8], ref,
                               rtol=1e-4, atol=1e-4)
