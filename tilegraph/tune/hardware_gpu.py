"""The GPU hardware model Gensor's GPU states are ranked with: from the device when one is
present (CUDA: the runtime's device attributes, tune/cuda_device.py; OpenCL: the pyopencl device
query), the one spec table (tilegraph/gpu_specs.py) otherwise.

    hw = gpu_hardware(Target("cuda"))       # H100 table entry when nvidia-smi names an H100
    hw.num_sms, hw.max_threads_per_block, hw.shared_memory_per_block, hw.dram_bandwidth, ...
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tilegraph.gpu_specs import gpu_spec

SMEM_BANDWIDTH_PER_SM = 128 * 1.4e9  # bytes/s: 32 banks x 4 B per clock at ~1.4 GHz


@dataclass(frozen=True)
class GpuHardware:
    name: str
    num_sms: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    shared_memory_per_block: int
    shared_memory_per_sm: int
    registers_per_sm: int
    peak_flops: float
    dram_bandwidth: float
    smem_bandwidth: float
    banks: int = 32

    def active_blocks(self, threads: int, shared_bytes: int, registers: int) -> int:
        """Blocks one SM holds at once (0 when one block does not fit)."""
        by_threads = self.max_threads_per_sm // max(1, threads)
        by_smem = self.shared_memory_per_sm // shared_bytes if shared_bytes else 32
        by_regs = self.registers_per_sm // max(1, registers * threads)
        return max(0, min(32, by_threads, by_smem, by_regs))


def gpu_hardware(target: Any) -> GpuHardware:
    """The model of `target` (a GPU Target): device query for OpenCL when a device exists."""
    name = str(getattr(target, "device_name", None) or "generic")
    sms = int(getattr(target, "num_sms", None) or 16)
    spec = gpu_spec(name)
    hw = GpuHardware(
        name=name, num_sms=sms, warp_size=int(getattr(target, "warp_size", None) or 32),
        max_threads_per_block=int(getattr(target, "max_threads_per_block", None) or 1024),
        max_threads_per_sm=2048, shared_memory_per_block=int(getattr(target, "shared_memory_bytes", None) or 48 << 10),
        shared_memory_per_sm=spec.shared_memory_per_sm, registers_per_sm=spec.registers_per_sm,
        peak_flops=spec.fp32_flops, dram_bandwidth=spec.dram_bandwidth,
        smem_bandwidth=SMEM_BANDWIDTH_PER_SM * sms,
    )
    if getattr(target, "kind", None) == "cuda":
        from tilegraph.tune.cuda_device import hardware_from_attributes, query_cuda_attributes

        attrs = query_cuda_attributes(target)
        if attrs is not None:
            hw = replace(hw, **hardware_from_attributes(name, attrs))
    if getattr(target, "kind", None) == "opencl":
        try:
            from tilegraph.runtime.opencl import available, device_limits

            if available():
                lim = device_limits()
                hw = replace(hw, name=lim["device_name"], num_sms=lim["num_sms"],
                             max_threads_per_block=min(hw.max_threads_per_block, lim["max_threads_per_block"]),
                             shared_memory_per_block=min(hw.shared_memory_per_block, lim["shared_memory_bytes"]))
        except ImportError:
            pass
    return hw


__all__ = ["GpuHardware", "gpu_hardware"]
