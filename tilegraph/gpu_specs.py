"""The one table of GPU parts: what a Target records of a device and what the GPU hardware model
ranks schedules with, when the device itself cannot be asked (no GPU here, or a named other one).

    spec = gpu_spec("NVIDIA H100 80GB HBM3")   # the H100 row (fragments match case-insensitively)
    spec.compute_capability, spec.num_sms, spec.l2_bytes, spec.fp32_flops, spec.dram_bandwidth

Rows are matched in order and the first fragment found in the name wins ("A100" before "A10").
Figures are the vendors' datasheet values; a device query (tune/cuda_device.py, pyopencl) wins
over them where a device is present.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    compute_capability: str
    num_sms: int
    l2_bytes: int
    fp32_flops: float  # FLOP/s
    dram_bandwidth: float  # bytes/s
    shared_memory_per_sm: int  # bytes
    registers_per_sm: int


GPU_SPECS: dict[str, GpuSpec] = {
    "H200": GpuSpec("9.0", 132, 50 << 20, 67e12, 4.8e12, 228 << 10, 65536),
    "H100": GpuSpec("9.0", 132, 50 << 20, 67e12, 3.35e12, 228 << 10, 65536),
    "A100": GpuSpec("8.0", 108, 40 << 20, 19.5e12, 1.55e12, 164 << 10, 65536),
    "A10": GpuSpec("8.6", 72, 6 << 20, 31e12, 0.6e12, 100 << 10, 65536),
    "RTX 4090": GpuSpec("8.9", 128, 72 << 20, 82e12, 1.0e12, 100 << 10, 65536),
    "RTX 3090": GpuSpec("8.6", 82, 6 << 20, 35e12, 0.94e12, 100 << 10, 65536),
    "V100": GpuSpec("7.0", 80, 6 << 20, 15.7e12, 0.9e12, 96 << 10, 65536),
    "T4": GpuSpec("7.5", 40, 4 << 20, 8.1e12, 0.32e12, 64 << 10, 65536),
}
# An unknown part. sm_75: the oldest architecture every CUDA toolkit from 11 to 13 compiles for
# (13 dropped sm_70).
GENERIC_NAME = "generic"
GENERIC = GpuSpec("7.5", 80, 6 << 20, 10e12, 0.5e12, 64 << 10, 65536)


def gpu_spec(name: str) -> GpuSpec:
    """The row whose fragment the device name contains, else GENERIC."""
    for fragment, spec in GPU_SPECS.items():
        if fragment.lower() in name.lower():
            return spec
    return GENERIC


__all__ = ["GENERIC", "GENERIC_NAME", "GPU_SPECS", "GpuSpec", "gpu_spec"]
