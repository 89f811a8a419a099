"""The timing protocol: every system timed alternately, in one process, in the same window.

    systems = [System("tilegraph", lambda: kernel(a, b)), System("torch", lambda: torch.mm(ta, tb))]
    timings = measure_interleaved(systems, rounds=5, min_sample_s=0.05)
    timings["torch"].median_s, timings["torch"].iqr_pct

Per system: one warm-up call, then calibration picks `inner` so that one sample (the call looped
`inner` times) lasts at least `min_sample_s`. Then `rounds` rounds run A, B, C, A, B, C, ...; each
sample stores the per-call time (sample time / inner). Before each sample the harness sleeps
`settle_s` so that the previous system's worker threads (OpenMP / OpenBLAS spin-waiting) have gone
idle and do not steal cycles from the next one. A system that raises is dropped with its error.
Each Timing also records `foreign_cores`: the CPU that other processes used during the window
(from /proc/stat, less this process's own CPU time), so noisy windows can be recognised.

Only the standard library is used here: the TVM worker (another venv) imports this file too.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class System:
    """A named zero-argument callable; inputs are bound beforehand so only the call is timed."""

    name: str
    call: Callable[[], object]


@dataclass
class Timing:
    name: str
    samples: list[float] = field(default_factory=list)  # seconds per call, one per round
    inner: int = 0
    error: str | None = None
    foreign_cores: float = math.nan

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def iqr_pct(self) -> float:
        """Interquartile range in % of the median (0 with fewer than 2 samples)."""
        if len(self.samples) < 2:
            return 0.0
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return 100.0 * (q[2] - q[0]) / self.median_s

    @property
    def minmax_pct(self) -> float:
        if not self.samples:
            return math.nan
        return 100.0 * (max(self.samples) - min(self.samples)) / self.median_s

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "samples": self.samples, "inner": self.inner, "error": self.error,
                "median_s": self.median_s, "iqr_pct": self.iqr_pct, "minmax_pct": self.minmax_pct,
                "foreign_cores": self.foreign_cores}


def machine_busy_s() -> float:
    """CPU seconds all processes have spent busy since boot (/proc/stat), NaN where unreadable."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return math.nan
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class ForeignLoad:
    """Average number of cores other processes kept busy between start() and cores()."""

    def start(self) -> None:
        self._busy, self._own, self._wall = machine_busy_s(), own_cpu_s(), time.perf_counter()

    def cores(self) -> float:
        wall = time.perf_counter() - self._wall
        foreign = (machine_busy_s() - self._busy) - (own_cpu_s() - self._own)
        return max(0.0, foreign / wall) if wall > 0 else math.nan


def _loop(call: Callable[[], object], inner: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(inner):
        call()
    return clock() - start


def calibrate(call: Callable[[], object], min_sample_s: float, clock: Callable[[], float] = time.perf_counter,
              max_inner: int = 1_000_000) -> int:
    """Smallest power-of-two-ish loop count whose run lasts >= min_sample_s (after one warm-up call)."""
    call()
    inner = 1
    while True:
        elapsed = _loop(call, inner, clock)
        if elapsed >= min_sample_s or inner >= max_inner:
            return inner
        # aim 20% over the target so the sample does not fall just short on a faster round
        guess = int(math.ceil(inner * 1.2 * min_sample_s / max(elapsed, 1e-9)))
        inner = min(max_inner, max(inner * 2, guess) if elapsed < min_sample_s / 10 else max(inner + 1, guess))


def measure_interleaved(systems: Sequence[System], rounds: int = 5, min_sample_s: float = 0.05,
                        settle_s: float = 0.02, clock: Callable[[], float] = time.perf_counter,
                        sleep: Callable[[float], None] = time.sleep) -> dict[str, Timing]:
    """Time every system `rounds` times, alternating A, B, C, A, B, C, ...; returns name -> Timing."""
    if rounds < 1:
        raise ValueError(f"argument rounds must be >= 1, got {rounds}")
    if min_sample_s <= 0:
        raise ValueError(f"argument min_sample_s must be > 0, got {min_sample_s}")
    names = [s.name for s in systems]
    if len(set(names)) != len(names):
        raise ValueError(f"argument systems: duplicate names {names}")
    timings = {s.name: Timing(s.name) for s in systems}
    load = ForeignLoad()
    load.start()
    for s in systems:
        try:
            timings[s.name].inner = calibrate(s.call, min_sample_s, clock)
        except Exception as exc:  # noqa: BLE001 - a failing system is reported, never fatal
            timings[s.name].error = f"{type(exc).__name__}: {exc}"
    for _ in range(rounds):
        for s in systems:
            t = timings[s.name]
            if t.error is not None:
                continue
            if settle_s > 0:
                sleep(settle_s)
            try:
                t.samples.append(_loop(s.call, t.inner, clock) / t.inner)
            except Exception as exc:  # noqa: BLE001
                t.error = f"{type(exc).__name__}: {exc}"
    foreign = load.cores()
    for t in timings.values():
        t.foreign_cores = foreign
    return timings
