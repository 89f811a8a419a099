import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.testing.reference import reference_outputs
from tilegraph.tune.gensor.gpu_state import (
    GpuSpace,
    GpuState,
    feasible,
    gpu_schedule,
    gpu_search,
    minimal_gpu_state,
    predict,
    transitions,
)
from tilegraph.tune.hardware_gpu import GpuHardware, gpu_hardware

OPENCL = tg.Target("opencl")
SPECS = {
    "gemm": "matmul:32,16,24",
    "conv2d_nhwc": "conv2d_nhwc:1,6,6,4,8,3,1,1",
    "depthwise": "depthwise_conv2d_nhwc:1,6,6,8,3,1,1",
    "softmax": "softmax:4,32",
    "layer_norm": "layer_norm:4,32",
}
HW = GpuHardware("test", num_sms=8, warp_size=32, max_threads_per_block=256, max_threads_per_sm=2048,
                 shared_memory_per_block=32 << 10, shared_memory_per_sm=64 << 10, registers_per_sm=65536,
                 peak_flops=1e12, dram_bandwidth=1e11, smem_bandwidth=1e12)


def _case(name, rng):
    wl = workloads.from_spec(SPECS[name])
    state = gpu_search(wl, HW, top_k=1, seed=0)[0]
    sch = gpu_schedule(wl, state)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    if name == "layer_norm":
        inputs[1] = np.abs(inputs[1]) + 0.5
    return wl, sch, inputs, reference_outputs(wl, inputs)[0]


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng(0)
    return {name: _case(name, rng) for name in SPECS}


@pytest.mark.parametrize("name", list(SPECS))
def test_gensor_gpu_schedule_matches_numpy_in_the_interpreter(cases, name):
    wl, sch, inputs, ref = cases[name]
    program = lower_gpu(sch.func, OPENCL)
    for order in ("serial", "reversed"):
        out = tg.interpret(program.lowered, *inputs, thread_order=order).reshape(ref.shape)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def _opencl_or_skip():
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import available

    if not available():
        pytest.skip("no OpenCL device")


@pytest.mark.needs_opencl
@pytest.mark.parametrize("name", list(SPECS))
def test_gensor_gpu_schedule_matches_numpy_on_opencl(cases, name):
    _opencl_or_skip()
    wl, sch, inputs, ref = cases[name]
    kernel = tg.build(sch, target="opencl")
    np.testing.assert_allclose(kernel(*inputs), ref, rtol=1e-4, atol=1e-4)


def test_gemm_state_uses_shared_tiles_and_threads(cases):
    _, sch, _, _ = cases["gemm"]
    program = lower_gpu(sch.func, OPENCL)
    assert program.kernels[-1].threads > 1
    assert program.kernels[-1].shared_bytes > 0


def test_trace_replays_to_the_same_program(cases):
    wl, sch, _, _ = cases["gemm"]
    again = tg.Schedule.replay(wl, sch.trace.to_json())
    assert str(again) == str(sch)


def test_minimal_state_is_feasible_and_transitions_stay_in_the_space():
    wl = workloads.from_spec(SPECS["gemm"])
    space = GpuSpace.from_workload(wl)
    assert space.spatial == (32, 24) and space.reduce == (16,)
    s = minimal_gpu_state(space)
    assert feasible(space, s, HW)
    nbrs = transitions(space, s)
    assert nbrs and all(len(n.block) == 2 and len(n.rstep) == 1 for n in nbrs)
    assert all(n != s for n in nbrs)


def test_infeasible_states_are_refused():
    space = GpuSpace.from_workload(workloads.from_spec(SPECS["gemm"]))
    too_many_threads = GpuState((32, 24), (1, 1), (1, 1), (1,))
    assert not feasible(space, too_many_threads, HW)  # 768 threads > 256
    not_dividing = GpuState((5, 8), (1, 1), (1, 1), (1,))
    assert not feasible(space, not_dividing, HW)
    vthread_not_dividing = GpuState((8, 8), (2, 2), (3, 1), (1,))
    assert not feasible(space, vthread_not_dividing, HW)


def test_model_prefers_register_reuse_over_one_element_per_thread():
    space = GpuSpace.from_workload(workloads.from_spec("matmul:512,512,512"))
    naive = GpuState((16, 16), (1, 1), (1, 1), (1,))
    tiled = GpuState((64, 64), (4, 4), (1, 1), (8,))
    assert predict(space, tiled, HW) < predict(space, naive, HW)


def test_search_is_deterministic_and_ranked():
    wl = workloads.from_spec(SPECS["gemm"])
    space = GpuSpace.from_workload(wl)
    first = gpu_search(wl, HW, top_k=4, seed=3)
    assert first == gpu_search(wl, HW, top_k=4, seed=3)
    times = [predict(space, s, HW) for s in first]
    assert times == sorted(times)


def test_hardware_model_from_spec_table():
    hw = gpu_hardware(tg.Target("cuda", device_name="NVIDIA H100 80GB HBM3", num_sms=132))
    assert hw.num_sms == 132 and hw.dram_bandwidth > 3e12 and hw.max_threads_per_block == 1024
    assert hw.active_blocks(threads=256, shared_bytes=48 << 10, registers=64) == 4


def test_gensor_strategy_proposes_gpu_candidates_for_gpu_targets():
    from tilegraph.tune.strategy.base import TuneContext
    from tilegraph.tune.strategy.gensor import GensorStrategy

    wl = workloads.from_spec(SPECS["gemm"])
    strategy = GensorStrategy(top_k=3)
    batch = strategy.propose(TuneContext(wl, tg.Target("opencl"), seed=0, db=None), 3)
    assert 1 <= len(batch) <= 3
    for cand in batch:
        sch = tg.Schedule.replay(wl, cand.trace_json)
        assert lower_gpu(sch.func, OPENCL).kernels
