"""The hardware model's streaming-read probe on fresh numpy buffers as allocated, then on buffers
placed 0, 16 and 32 bytes past a cache line (GB/s, one thread, best of 3 runs each).

    PYTHONPATH=. python benchmarks/results/2026-12-06-hardware-probe/l2probe.py
"""

import ctypes
import tempfile

import numpy as np

from tilegraph.tune.hardware import _compile_bench, _facts_from_target, _nominal, fma_chains


def read_gbs(dll, data: np.ndarray, sink: ctypes.c_float) -> float:
    n = data.size
    reps = max(1, int(80e6 // (n * 4)))
    dll.bench_read(data.ctypes.data, n, 1, 1, ctypes.byref(sink))
    return max(dll.bench_read(data.ctypes.data, n, reps, 1, ctypes.byref(sink)) for _ in range(3)) / 1e9


def main() -> None:
    facts = _facts_from_target(None)
    nominal = _nominal(facts)
    dll = _compile_bench(nominal.simd_lanes_fp32 * 4, tempfile.mkdtemp(), fma_chains(nominal.vector_registers),
                         facts.isa_flags)
    sink = ctypes.c_float()
    for kb in (128, 256, 512, 768, 1024, 1536):
        print(kb, "KB", [round(read_gbs(dll, np.ones(kb * 1024 // 4, np.float32), sink)) for _ in range(6)])
    print("alignment check")
    n = 256 * 1024
    for trial in range(8):
        raw = np.ones(n + 64, np.float32)
        for offset in (0, 4, 8):
            shift = (-raw.ctypes.data % 64) // 4 + offset
            data = raw[shift:shift + n]
            print(trial, "offset", data.ctypes.data % 64, round(read_gbs(dll, data, sink)), end="; ")
        print()


if __name__ == "__main__":
    main()
