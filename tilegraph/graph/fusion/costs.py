"""Kernel costs for orchestration: each built kernel timed alone on random inputs, remembered.

    costs = KernelCosts.open()                       # the cache under config.cache_dir()
    seconds = costs.measure(kernel, threads=2)       # cached by the kernel's library (its content
                                                     # hash: source and compiler flags) and threads
    bound = roofline_seconds(workload, hw, threads=2)  # bytes at the speed of the level they fit in,
                                                       # or FLOPs at peak: an estimate from below

Timing uses the runtime's timer (warm-up, several samples, the median), one kernel at a time on
the calling thread, never two at once. Inputs are random floats (integer inputs are zeros: a
gather's indices stay in range). The cache is a JSON file replaced atomically; an unreadable one
is ignored (costs are re-measured), never an error.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph import config
from tilegraph.runtime.timer import measure

CACHE_VERSION = 1
MIN_TIME_S = 0.02  # per kernel: enough for a median of a few samples; most kernels run in microseconds


class KernelCosts:
    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, float] = {}
        self.measured = 0  # kernels timed (not found in the cache) by this object
        if path is not None and path.exists():
            try:
                data = json.loads(path.read_text())
                if data.get("version") == CACHE_VERSION:
                    self.entries = {str(k): float(v) for k, v in data["seconds"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                self.entries = {}

    @classmethod
    def open(cls) -> KernelCosts:
        return cls(config.cache_dir() / "kernel_costs.json")

    def measure(self, kernel: Any, threads: int) -> float | None:
        """Seconds per call, or None when the kernel's arrays would not fit beside the model in
        memory (the caller estimates it instead)."""
        key = f"{Path(kernel.lib_path).parent.name}/{Path(kernel.lib_path).name}:{kernel.entry}:t{threads}"
        if key not in self.entries:
            if not _fits(kernel):
                return None
            self.entries[key] = _time(kernel, threads)
            self.measured += 1
        return self.entries[key]

    def save(self) -> None:
        if self.path is None or not self.measured:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".kernel_costs.")
            with os.fdopen(fd, "w") as f:
                json.dump({"version": CACHE_VERSION, "seconds": self.entries}, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written costs re-measurement, nothing else


def _time(kernel: Any, threads: int) -> float:
    rng = np.random.default_rng(0)
    inputs = [_random(b, rng) for b in kernel.inputs]
    outputs = [np.empty(b.shape, dtype=b.dtype.name) for b in kernel.outputs]
    launch = kernel.bind(inputs, outputs, num_threads=threads)
    return max(measure(launch.run, warmup=1, min_time=MIN_TIME_S, repeat=3).median, 1e-9)


def _fits(kernel: Any) -> bool:
    """Whether timing arrays for the kernel take at most a quarter of the memory available."""
    from tilegraph.testing.data import available_memory

    have = available_memory()
    need = sum(int(np.prod(b.shape, dtype=np.int64)) * np.dtype(b.dtype.name).itemsize
               for b in (*kernel.inputs, *kernel.outputs))
    return have is None or need <= have // 4


def _random(buffer: Any, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(buffer.dtype.name)
    if dtype.kind == "f":  # drawn in the buffer's type: no float64 copy of a large input
        return rng.standard_normal(buffer.shape, dtype=np.float32).astype(dtype, copy=False)
    return np.zeros(buffer.shape, dtype=dtype)


def roofline_seconds(workload: Any, hw: Any, threads: int) -> float:
    """An estimate from below of a workload's time: its arguments' bytes moved once at the
    bandwidth of the level they fit in, or its FLOPs at peak, whichever is larger."""
    nbytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype.name).itemsize for t in (*workload.inputs, *workload.outputs))
    level = "l2" if nbytes <= hw.cache_bytes("l2") * threads else "l3" if nbytes <= hw.cache_bytes("l3") else "dram"
    return max(nbytes / hw.bandwidth(level, cores=threads), workload.flops() / hw.peak_flops(cores=threads))


__all__ = ["KernelCosts", "roofline_seconds"]
