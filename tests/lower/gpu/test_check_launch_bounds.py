"""check_launch_bounds: a kernel the device cannot launch is refused before any compiler runs."""

import pytest

import tilegraph as tg
from tests.lower.gpu.test_pipeline import gemm_schedule
from tilegraph.lower.gpu.pipeline import lower_gpu


def test_too_many_threads_or_too_much_shared_memory_are_refused():
    _, sch = gemm_schedule(m=64, n=64, tile=16, threads=16)  # 256 threads per block
    small = tg.Target("opencl", device_name="tiny", num_sms=1, shared_memory_bytes=32 << 10, max_threads_per_block=128)
    with pytest.raises(tg.LoweringError, match=r"256 threads per block \(16, 16, 1\); the target allows 128"):
        lower_gpu(sch.func, small)
    tight = tg.Target("opencl", device_name="tiny", num_sms=1, shared_memory_bytes=64, max_threads_per_block=1024)
    with pytest.raises(tg.LoweringError, match="shared"):
        lower_gpu(sch.func, tight)
    ok = tg.Target("opencl", device_name="big", num_sms=1, shared_memory_bytes=48 << 10, max_threads_per_block=1024)
    assert lower_gpu(sch.func, ok).kernels[0].threads == 256
