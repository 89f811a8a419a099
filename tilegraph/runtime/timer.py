"""Wall-clock timing of a native call with warm-up, adaptive repetition and optional cache flush.

    measure(run, warmup=2, min_time=0.2, repeat=5)
        warm up; then take samples until there are at least `repeat` of them and they add up to
        `min_time` seconds. A fast call is batched (`number` calls per sample) so one sample
        lasts about SAMPLE_TARGET_S; each sample is seconds per call.
    measure(..., flush=CacheFlusher(bytes))   touches a buffer larger than the last-level cache
        before every sample (one call per sample then, so each starts cold).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

SAMPLE_TARGET_S = 1e-3
MAX_SAMPLES = 100_000
MAX_TOTAL_S = 60.0


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call. `spread` is the coefficient of variation (stdev / mean) of the samples."""

    median: float
    min: float
    max: float
    mean: float
    spread: float
    samples: tuple[float, ...] = field(repr=False)

    @classmethod
    def from_samples(cls, samples: list[float] | tuple[float, ...]) -> TimingResult:
        if not samples:
            raise ValueError("TimingResult needs at least one sample")
        mean = statistics.fmean(samples)
        spread = statistics.pstdev(samples) / mean if mean > 0 else 0.0
        return cls(statistics.median(samples), min(samples), max(samples), mean, spread, tuple(samples))


class CacheFlusher:
    """Evicts caches by writing a buffer of `nbytes` (make it larger than the last-level cache)."""

    def __init__(self, nbytes: int):
        if nbytes < 1:
            raise ValueError(f"CacheFlusher nbytes must be positive, got {nbytes}")
        self.buffer = np.zeros(max(1, nbytes // 8), dtype=np.float64)

    def __call__(self) -> None:
        np.add(self.buffer, 1.0, out=self.buffer)


WARMUP_RUNS_MAX = 100


def measure(run: Callable[[], object], warmup: int = 2, min_time: float = 0.2, repeat: int = 5,
            number: int | None = None, flush: Callable[[], None] | None = None,
            max_samples: int | None = None, warmup_time: float = 0.0,
            enough: Callable[[list[float]], bool] | None = None) -> TimingResult:
    """Time `run()` (see the module docstring); at most `max_samples` samples (MAX_SAMPLES by default).
    With `warmup_time`, the warm-up goes on after `warmup` runs until that many seconds have passed
    (at most WARMUP_RUNS_MAX runs): a kernel's first tens of milliseconds in a process that was
    idle run slower than the rest (threads not yet spread over the cores, caches cold).
    `enough(samples)`, asked once there are `repeat` samples, may end the sampling before
    `min_time` (a tuner's candidate already clearly slower than its best)."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if min_time < 0:
        raise ValueError(f"min_time must be >= 0, got {min_time}")
    if number is not None and number < 1:
        raise ValueError(f"number must be >= 1, got {number}")
    cap = MAX_SAMPLES if max_samples is None else max_samples
    if cap < repeat:
        raise ValueError(f"max_samples ({cap}) must be >= repeat ({repeat})")
    clock = time.perf_counter
    first = clock()
    runs = 0
    while runs < warmup or (clock() - first < warmup_time and runs < WARMUP_RUNS_MAX):
        run()
        runs += 1
    if number is None:
        per_call = (clock() - first) / runs if runs else 0.0
        number = 1 if flush is not None or per_call <= 0 else max(1, math.ceil(SAMPLE_TARGET_S / per_call))

    samples: list[float] = []
    total = 0.0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while len(samples) < repeat or (total < min_time and len(samples) < cap and total < MAX_TOTAL_S
                                        and not (enough is not None and enough(samples))):
            if flush is not None:
                flush()
            start = clock()
            for _ in range(number):
                run()
            elapsed = clock() - start
            total += elapsed
            samples.append(elapsed / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return TimingResult.from_samples(samples)
