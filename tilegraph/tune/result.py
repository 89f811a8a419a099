"""Plain result values that cross process boundaries during measurement (all picklable).

    BuildResult   builder -> runner: the compiled kernel (.so or GPU source), its argument specs, or a failure
    RunResult     runner -> tuner: the check verdict and timing statistics of one candidate
    TuneResult    tg.tune -> user: the best kernel found and a summary of the search

A result kind is one of RESULT_KINDS; only "ok" results may ever be returned as a best kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RESULT_KINDS = ("ok", "wrong_answer", "crash", "timeout", "run_error", "build_error", "build_timeout")


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument, in call order: inputs first, then outputs."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    is_output: bool
    is_constant: bool = False  # an input the workload marks constant (a model's weight): evicted before
    # each timed call where the policy says so (MeasurePolicy.evict_constants)


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    error_kind: str | None = None
    message: str = ""
    lib_path: str | None = None
    entry: str | None = None
    source: str | None = None
    args: tuple[ArgSpec, ...] = ()
    # how the runner rebuilds the kernel (tune/kernel_loader.py): "runtime" (CPU Kernel), "raw" (pointers in
    # ArgSpec order, test hook), "opencl", "cuda"
    loader: str = "runtime"
    input_buffers: tuple[Any, ...] = ()  # the Kernel's loop.ir.Buffer parameters, to load it in the runner
    output_buffers: tuple[Any, ...] = ()
    kernel_target: Any = None
    build_time_s: float = 0.0
    payload: Any = None  # what a GPU loader needs to rebuild the kernel (kernel_loader.GpuKernelSpec)
    stages: dict[str, float] = field(default_factory=dict, compare=False)  # seconds per build stage (tilegraph.stages)
    # the built library's bytes, where the runner is on another machine (tune/cluster): lib_path is the builder's
    library: bytes | None = field(default=None, compare=False, repr=False)
    # (input position, the packing kernel's build): this kernel reads that input packed, and the runner
    # packs it once per check, untimed, as a compiled model does once (tune/prepacked.py)
    prepack: tuple[int, BuildResult] | None = None


@dataclass(frozen=True)
class RunResult:
    kind: str
    message: str = ""
    samples: tuple[float, ...] = ()
    max_error: float | None = None
    stages: dict[str, float] = field(default_factory=dict, compare=False)  # seconds per stage in the runner's worker
    node: str = field(default="", compare=False)  # the cluster node that measured it ("": this machine)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def median(self) -> float | None:
        if not self.samples:
            return None
        s = sorted(self.samples)
        mid = len(s) // 2
        return s[mid] if len(s) % 2 else 0.5 * (s[mid - 1] + s[mid])

    @property
    def min(self) -> float | None:
        return min(self.samples) if self.samples else None

    @property
    def max(self) -> float | None:
        return max(self.samples) if self.samples else None

    @property
    def spread(self) -> float | None:
        """(max - min) / median: the relative noise of the samples."""
        med = self.median
        if not med:
            return None
        return (max(self.samples) - min(self.samples)) / med


@dataclass
class TuneResult:
    kernel: Any
    trace: Any
    latency_s: float
    gflops: float
    measured: int
    failed: int
    tuning_time_s: float
    strategy: str
    workload_key: str
    failures: dict[str, int] = field(default_factory=dict)
    # False for a target whose kernels ran here only under an emulator (tune/checked_only.py): every
    # candidate was checked, none timed, and latency_s / gflops are the model's prediction
    timed: bool = True
    profile: Any = None  # where the search's time went (tune/pipeline_profile.PipelineProfile)

    def summary(self) -> dict[str, Any]:
        return {
            "workload_key": self.workload_key, "strategy": self.strategy, "latency_s": self.latency_s,
            "gflops": self.gflops, "tuning_time_s": self.tuning_time_s, "measured": self.measured,
            "failed": self.failed, "timed": self.timed,
        }
