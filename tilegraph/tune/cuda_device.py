"""The CUDA device's own numbers for the GPU hardware model: a small nvcc-built library asks the
runtime for device attributes (SMs, threads, shared memory and registers per SM, clocks, memory
bus), from which the model's peaks follow.

    attrs = query_cuda_attributes(Target("cuda"))    # {"multiprocessors": 132, ...} or None
    hw = hardware_from_attributes("NVIDIA H100", attrs)

FP32 lanes per SM come from the compute capability (the one number the runtime does not report).
"""

from __future__ import annotations

import ctypes
import functools
import json
from typing import Any

from tilegraph.errors import TilegraphError

ATTRIBUTES = {  # our name -> cudaDeviceAttr enumerator
    "multiprocessors": "cudaDevAttrMultiProcessorCount",
    "warp_size": "cudaDevAttrWarpSize",
    "max_threads_per_block": "cudaDevAttrMaxThreadsPerBlock",
    "max_threads_per_sm": "cudaDevAttrMaxThreadsPerMultiProcessor",
    "shared_memory_per_block": "cudaDevAttrMaxSharedMemoryPerBlock",
    "shared_memory_per_sm": "cudaDevAttrMaxSharedMemoryPerMultiprocessor",
    "registers_per_sm": "cudaDevAttrMaxRegistersPerMultiprocessor",
    "clock_khz": "cudaDevAttrClockRate",
    "memory_clock_khz": "cudaDevAttrMemoryClockRate",
    "memory_bus_bits": "cudaDevAttrGlobalMemoryBusWidth",
    "l2_bytes": "cudaDevAttrL2CacheSize",
    "cc_major": "cudaDevAttrComputeCapabilityMajor",
    "cc_minor": "cudaDevAttrComputeCapabilityMinor",
}
# FP32 FMA lanes per SM by compute capability (CUDA C Programming Guide, arithmetic instructions)
FP32_LANES = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
              (9, 0): 128, (10, 0): 128, (12, 0): 128}
SMEM_BYTES_PER_CLOCK = 128  # 32 banks x 4 bytes


def query_source() -> str:
    """CUDA C++ of `tg_device_attributes(char* out, int size)`: device 0's attributes as JSON."""
    lines = ['#include <cuda_runtime.h>', '#include <stdio.h>',
             'extern "C" int tg_device_attributes(char* out, int size) {',
             '  int v = 0, n = 0, dev = 0;',
             '  cudaError_t err = cudaGetDevice(&dev);',
             '  if (err != cudaSuccess) return (int)err;',
             '  n += snprintf(out + n, size - n, "{");']
    for i, (key, attr) in enumerate(ATTRIBUTES.items()):
        sep = "" if i == 0 else ","
        lines += [f'  err = cudaDeviceGetAttribute(&v, {attr}, dev); if (err != cudaSuccess) return (int)err;',
                  f'  n += snprintf(out + n, size - n, "{sep}\\"{key}\\": %d", v);']
    lines += ['  n += snprintf(out + n, size - n, "}");', '  return n < size ? 0 : -1;', '}']
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=4)
def query_cuda_attributes(target: Any) -> dict[str, int] | None:
    """Device 0's attributes through the CUDA runtime, or None without a GPU or nvcc."""
    from tilegraph.build.compile import compile_cuda
    from tilegraph.target import gpu_visible

    if not gpu_visible():
        return None
    try:
        lib = ctypes.CDLL(str(compile_cuda(query_source(), target, name="tg_device_query")))
    except (TilegraphError, OSError):
        return None
    buf = ctypes.create_string_buffer(4096)
    if lib.tg_device_attributes(buf, len(buf)) != 0:
        return None
    return {k: int(v) for k, v in json.loads(buf.value.decode()).items()}


def hardware_from_attributes(name: str, attrs: dict[str, int]) -> dict[str, Any]:
    """GpuHardware fields from the attributes: peaks from clocks, lanes and the memory bus."""
    sms = attrs["multiprocessors"]
    clock = attrs["clock_khz"] * 1e3
    lanes = FP32_LANES.get((attrs["cc_major"], attrs["cc_minor"]), 64 if attrs["cc_major"] < 8 else 128)
    dram = 2 * attrs["memory_clock_khz"] * 1e3 * attrs["memory_bus_bits"] / 8  # double data rate
    return {
        "name": name, "num_sms": sms, "warp_size": attrs["warp_size"],
        "max_threads_per_block": attrs["max_threads_per_block"], "max_threads_per_sm": attrs["max_threads_per_sm"],
        "shared_memory_per_block": attrs["shared_memory_per_block"], "shared_memory_per_sm": attrs["shared_memory_per_sm"],
        "registers_per_sm": attrs["registers_per_sm"], "peak_flops": 2.0 * lanes * sms * clock,
        "dram_bandwidth": dram, "smem_bandwidth": SMEM_BYTES_PER_CLOCK * clock * sms,
    }


__all__ = ["ATTRIBUTES", "hardware_from_attributes", "query_cuda_attributes", "query_source"]
