"""tune/hardware_gpu.py: the GPU model from the spec table (and the device, for OpenCL)."""

import tilegraph as tg
from tilegraph.gpu_specs import GENERIC, GPU_SPECS
from tilegraph.tune.hardware_gpu import gpu_hardware


def test_spec_table_by_device_name_and_target_limits():
    hw = gpu_hardware(tg.Target("cuda", device_name="NVIDIA H100 80GB HBM3", compute_capability="9.0", num_sms=132))
    assert hw.num_sms == 132 and hw.peak_flops == GPU_SPECS["H100"].fp32_flops
    assert hw.dram_bandwidth == GPU_SPECS["H100"].dram_bandwidth
    unknown = gpu_hardware(tg.Target("cuda", device_name="Mystery GPU", compute_capability="8.0", num_sms=10))
    assert unknown.peak_flops == GENERIC.fp32_flops


def test_occupancy_counts_the_tightest_resource():
    hw = gpu_hardware(tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0", num_sms=108))
    assert hw.active_blocks(threads=256, shared_bytes=0, registers=32) == 8          # 2048 threads per SM
    assert hw.active_blocks(threads=128, shared_bytes=hw.shared_memory_per_sm // 2, registers=16) == 2
    assert hw.active_blocks(threads=1024, shared_bytes=0, registers=255) == 0        # registers do not fit


def test_one_table_serves_the_target_and_the_hardware_model():
    """A CUDA Target's capability, SMs and L2 and the model's peaks come from the same row."""
    target = tg.Target("cuda", device_name="NVIDIA A100-SXM4-40GB")
    row = GPU_SPECS["A100"]
    assert (target.compute_capability, target.num_sms, target.l2_bytes) == (row.compute_capability, row.num_sms,
                                                                           row.l2_bytes)
    assert gpu_hardware(target).peak_flops == row.fp32_flops  # "A100" matched before "A10"
