"""GPU row kernels (issue 18, part 4): one warp per row, reductions by warp shuffles (CUDA) or
shared memory (OpenCL), checked against float64 references at odd sizes, in the interpreter in
every thread order and on PoCL."""

import shutil

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.codegen.cuda import codegen_cuda
from tilegraph.loop.ir import AllReduce, Barrier, For
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.schedule.defaults import default_gpu_schedule
from tilegraph.schedule.gpu_rows import is_row_operator, row_gpu_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.testing.reference import reference_outputs

CUDA = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0", cc=shutil.which("nvcc") or "nvcc")
OPENCL = tg.Target("opencl", device_name="tests", num_sms=4, shared_memory_bytes=32 << 10, max_threads_per_block=256)
ROW_SPECS = ["softmax:5,37", "softmax:2,3,8", "layer_norm:7,100", "sum:37,5", "max:3,64", "min:1,1"]


def _inputs(wl, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    return arrays, reference_outputs(wl, arrays)[0]


@pytest.mark.parametrize("spec,expected", [
    ("softmax:4,32", True), ("layer_norm:4,32", True), ("sum:37,5", True), ("max:3,64", True),
    ("matmul:8,8,8", False), ("conv2d_nhwc:1,6,6,4,8,3,1,1", False), ("mean:4,3,50", False), ("relu:4,4", False),
])
def test_row_operators_are_recognised(spec, expected):
    assert is_row_operator(workloads.from_spec(spec)) is expected
    assert (row_gpu_schedule(workloads.from_spec(spec)) is not None) is expected


@pytest.mark.parametrize("spec", ROW_SPECS)
@pytest.mark.parametrize("rows_per_block", [1, 2, 4])
def test_row_kernel_matches_numpy_before_and_after_lowering(spec, rows_per_block):
    wl = workloads.from_spec(spec)
    sch = row_gpu_schedule(wl, rows_per_block)
    inputs, ref = _inputs(wl)
    for order in ("serial", "random"):  # the schedule: a thread-bound reduction means the reduction
        np.testing.assert_allclose(tg.interpret(sch, *inputs, thread_order=order, seed=1), ref, rtol=1e-5, atol=1e-5)
    for target in (OPENCL, CUDA):  # CUDA keeps AllReduce (shuffles), OpenCL goes through shared memory
        lowered = lower_gpu(sch.func, target).lowered
        for order in ("lockstep", "serial", "reversed", "random"):
            got = np.asarray(tg.interpret(lowered, *inputs, thread_order=order, seed=2)).reshape(ref.shape)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=f"{target.kind} {order}")


def test_row_kernel_is_one_kernel_with_warp_shuffles_on_cuda():
    wl = workloads.from_spec("softmax:64,768")
    program = lower_gpu(row_gpu_schedule(wl, 4).func, CUDA)
    assert len(program.kernels) == 1
    k = program.kernels[0]
    assert k.block == (32, 4, 1) and k.grid == (16, 1, 1)
    stmts = list(walk_stmts(k.func.body))
    assert sum(isinstance(s, AllReduce) for s in stmts) == 2 and not any(isinstance(s, Barrier) for s in stmts)
    code = codegen_cuda(program).code
    assert code.count("__shfl_xor_sync(0xffffffffu") == 2 and "__syncthreads" not in code
    # coalesced: lane l reads column l + 32 j of its row
    assert all(s.kind != "threadIdx.x" or s.extent == 32 for s in stmts if isinstance(s, For))


def test_opencl_row_kernel_uses_shared_memory_and_barriers():
    program = lower_gpu(row_gpu_schedule(workloads.from_spec("layer_norm:7,100"), 2).func, OPENCL)
    stmts = list(walk_stmts(program.lowered.body))
    assert not any(isinstance(s, AllReduce) for s in stmts)
    assert sum(isinstance(s, Barrier) for s in stmts) >= 2


@pytest.mark.needs_nvcc
def test_row_kernel_cuda_source_compiles():
    from tilegraph.build.compile import check_cuda_syntax

    for spec in ("softmax:5,37", "layer_norm:7,100", "sum:37,5"):
        wl = workloads.from_spec(spec)
        check_cuda_syntax(codegen_cuda(lower_gpu(row_gpu_schedule(wl, 2).func, CUDA)).code, CUDA)


@pytest.mark.needs_opencl
@pytest.mark.parametrize("spec", ROW_SPECS)
def test_row_kernel_runs_on_opencl(spec, opencl_device):
    wl = workloads.from_spec(spec)
    inputs, ref = _inputs(wl, seed=5)
    for rows_per_block in (1, 4):
        kernel = tg.build(row_gpu_schedule(wl, rows_per_block), target="opencl")
        np.testing.assert_allclose(kernel(*inputs), ref, rtol=1e-5, atol=1e-5)


def test_row_kernel_is_the_default_gpu_schedule_and_its_trace_replays():
    wl = workloads.from_spec("softmax:6,50")
    sch = default_gpu_schedule(wl)
    assert any(isinstance(s, For) and s.kind == "threadIdx.y" for s in walk_stmts(sch.func.body))
    replayed = Schedule.replay(wl, sch.trace.to_json())
    assert replayed.func == sch.func


def test_gensor_gpu_candidates_include_row_kernels():
    from tilegraph.tune.gensor.gpu_state import gpu_candidates

    cands = gpu_candidates(workloads.from_spec("softmax:64,768"), OPENCL, top_k=8)
    rows = [state for _, _, state in cands if state.get("row_kernel")]
    assert rows and {s["rows_per_block"] for s in rows} <= {1, 2, 4, 8}


# ------------------------------------------------------------------------------ matrix-vector products
def _fc_head(k, n):
    """A batch-1 FC layer with its epilogue: relu(x @ w) + b (ResNet-50's head is 1x2048 . 2048x1000)."""
    from tilegraph import ops
    from tilegraph.te.tensor import placeholder
    from tilegraph.te.workload import Workload

    x, w, b = placeholder((1, k), name="x"), placeholder((k, n), name="w"), placeholder((1, n), name="b")
    return Workload([x, w, b], [ops.add(ops.relu(ops.matmul(x, w)), b)], name="fc_head")


MATVECS = {"matmul:1,100,7": lambda: workloads.from_spec("matmul:1,100,7"),
           "dense:1,77,9": lambda: workloads.from_spec("dense:1,77,9"),
           "batch_matmul:1,1,5,130": lambda: workloads.from_spec("batch_matmul:1,1,5,130"),
           "matmul:1,64,1": lambda: workloads.from_spec("matmul:1,64,1"),
           "fc_head:300,13": lambda: _fc_head(300, 13), "fc_head:65,1": lambda: _fc_head(65, 1)}


@pytest.mark.parametrize("spec,expected", [
    ("matmul:1,2048,1000", True), ("dense:1,768,768", True), ("matmul:1,64,5", True),
    ("matmul:2,100,7", False),        # two rows: not a vector
    ("matmul:1,63,5", False),         # too short a reduction for 32 lanes to pay
    ("matmul:1,768,50257", False),    # enough outputs to fill a GPU a thread each, reading w coalesced
    ("softmax:1,4096", False), ("conv2d_nhwc:1,6,6,4,8,3,1,1", False),
])
def test_matrix_vector_products_are_recognised(spec, expected):
    from tilegraph.schedule.gpu_rows import is_matvec, matvec_gpu_schedule

    wl = workloads.from_spec(spec)
    assert is_matvec(wl) is expected
    assert (matvec_gpu_schedule(wl) is not None) is expected


@pytest.mark.parametrize("name", sorted(MATVECS))
def test_matvec_kernel_matches_numpy_before_and_after_lowering(name):
    wl = MATVECS[name]()
    sch = default_gpu_schedule(wl)  # the matrix-vector kernel is the default GPU schedule
    kinds = {s.kind for s in walk_stmts(sch.func.body) if isinstance(s, For)}
    assert {"blockIdx.x", "threadIdx.y", "threadIdx.x"} <= kinds
    inputs, ref = _inputs(wl, seed=3)
    for order in ("serial", "random"):
        np.testing.assert_allclose(tg.interpret(sch, *inputs, thread_order=order, seed=1), ref, rtol=1e-5, atol=1e-5)
    for target in (OPENCL, CUDA):
        program = lower_gpu(sch.func, target)
        assert len(program.kernels) == 1
        for order in ("lockstep", "serial", "reversed", "random"):
            got = np.asarray(tg.interpret(program.lowered, *inputs, thread_order=order, seed=2)).reshape(ref.shape)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=f"{target.kind} {order}")
    assert Schedule.replay(wl, sch.trace.to_json()).func == sch.func


def test_matvec_kernel_puts_k_on_the_lanes_and_an_output_per_warp():
    wl = workloads.from_spec("matmul:1,2048,1000")
    program = lower_gpu(default_gpu_schedule(wl).func, CUDA)
    (k,) = program.kernels
    assert k.block == (32, 4, 1) and k.grid == (250, 1, 1)  # 1000 warps (one flat thread each: 16 blocks of 64)
    code = codegen_cuda(program).code
    assert code.count("__shfl_xor_sync(0xffffffffu") == 1 and "__syncthreads" not in code


@pytest.mark.needs_nvcc
def test_matvec_kernel_cuda_source_compiles():
    from tilegraph.build.compile import check_cuda_syntax

    for name in ("matmul:1,100,7", "fc_head:300,13"):
        check_cuda_syntax(codegen_cuda(lower_gpu(default_gpu_schedule(MATVECS[name]()).func, CUDA)).code, CUDA)


@pytest.mark.needs_opencl
@pytest.mark.parametrize("name", sorted(MATVECS))
def test_matvec_kernel_runs_on_opencl(name, opencl_device):
    wl = MATVECS[name]()
    inputs, ref = _inputs(wl, seed=6)
    kernel = tg.build(default_gpu_schedule(wl), target="opencl")
    np.testing.assert_allclose(kernel(*inputs), ref, rtol=1e-5, atol=1e-5)
