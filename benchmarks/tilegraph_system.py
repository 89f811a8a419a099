"""tilegraph as a raced system: resolve the workload, tune it within the budget, time the kernel.

    resolved = resolve_workload(case)             # tilegraph.workloads.get / from_spec, or a note
    system = TilegraphSystem("gensor", budget_s=30)
    prepared = system.prepare(case, inputs)       # runs tg.tune(...); prepared.call() runs the kernel

Every interface used here is looked up at run time, so a tilegraph without tuning (or without the
workload registry) turns this system into a skipped one with a note instead of a failed run.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.peers import PeerSkip, Prepared


@dataclass
class ResolvedWorkload:
    workload: Any = None
    note: str = ""


def resolve_workload(case: Any) -> ResolvedWorkload:
    try:
        registry = importlib.import_module("tilegraph.workloads")
        if case.workload_id is not None:
            return ResolvedWorkload(registry.get(case.workload_id, case.batch))
        if case.spec is not None:
            return ResolvedWorkload(registry.from_spec(case.spec))
        return ResolvedWorkload(note="no tilegraph workload id or spec")
    except Exception as exc:  # noqa: BLE001 - reported as a note
        return ResolvedWorkload(note=f"tilegraph workload unavailable ({type(exc).__name__}: {exc})")


def tilegraph_inputs(workload: Any, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, float64 references) from tilegraph.testing."""
    testing = importlib.import_module("tilegraph.testing")
    inputs = [np.asarray(a) for a in testing.random_inputs(workload, seed)]
    return inputs, [np.asarray(r, dtype=np.float64) for r in testing.reference_outputs(workload, inputs)]


def fit_inputs(inputs: Sequence[np.ndarray], shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray] | None:
    """The inputs reshaped to `shapes` (same element counts, same order), or None when they do not fit."""
    if len(inputs) != len(shapes):
        return None
    fitted = []
    for a, shape in zip(inputs, shapes):
        if a.size != int(np.prod(shape)):
            return None
        fitted.append(np.ascontiguousarray(a.reshape(shape), dtype=np.float32))
    return fitted


def workload_input_shapes(workload: Any) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in workload.inputs]


def hardware_peaks(threads: Sequence[int]) -> tuple[dict[int, float], str]:
    """Measured fp32 peak FLOP/s per thread count from tilegraph.tune.hardware, or ({}, why not)."""
    try:
        hardware = importlib.import_module("tilegraph.tune.hardware")
        target = importlib.import_module("tilegraph.target").Target("cpu")
        model = hardware.hardware_model(target)
        peaks = {t: float(model.peak_flops(cores=t)) for t in threads}
        return peaks, "" if getattr(model, "measured", True) else "nominal (not measured) peak"
    except Exception as exc:  # noqa: BLE001
        return {}, f"peak unavailable ({type(exc).__name__}: {exc})"


def machine_fingerprint() -> str:
    try:
        return str(importlib.import_module("tilegraph.target").Target("cpu").fingerprint)
    except Exception:  # noqa: BLE001
        return ""


class TilegraphSystem:
    """One tuning strategy of tilegraph; `prepare` tunes (that is the tuning time) and binds the kernel."""

    def __init__(self, strategy: str, budget_s: float, seed: int = 0, db: str | None = None):
        self.strategy = strategy
        self.name = f"tilegraph-{strategy}"
        self.budget_s = budget_s
        self.seed = seed
        self.db = db
        self.threads = 1

    def unavailable(self) -> str | None:
        try:
            tg = importlib.import_module("tilegraph")
            tune = getattr(tg, "tune", None)
            if not callable(tune):
                tune = importlib.import_module("tilegraph.tune").tune
        except Exception as exc:  # noqa: BLE001
            return f"tilegraph tuning unavailable ({type(exc).__name__}: {exc})"
        return None if callable(tune) else "tilegraph.tune is not callable"

    def set_threads(self, n: int) -> None:
        self.threads = n

    def tune(self, workload: Any) -> Any:
        tg = importlib.import_module("tilegraph")
        tune = tg.tune if callable(getattr(tg, "tune", None)) else importlib.import_module("tilegraph.tune").tune
        return tune(workload, target="cpu", strategy=self.strategy, time_budget=self.budget_s, db=self.db,
                    seed=self.seed, progress=False)

    def prepare_tuned(self, result: Any, inputs: Sequence[np.ndarray]) -> Prepared:
        """Bind an already tuned kernel (tuning is done once per workload, timing once per thread count)."""
        kernel = result.kernel
        if kernel is None:
            raise PeerSkip("tuning found no kernel that passed its check")
        from tilegraph.runtime.host_memory import aligned_copy

        args = [aligned_copy(a) for a in inputs]  # on a cache line, as torch's tensors and a compiled model's are

        def call() -> Any:
            return kernel(*args, num_threads=self.threads)

        def outputs() -> list[np.ndarray]:
            out = call()
            return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]

        return Prepared(call=call, outputs=outputs, tuning_time_s=float(getattr(result, "tuning_time_s", 0.0)),
                        measurements=int(getattr(result, "measured", 0)))
