"""Measurement policy and the shared pieces of measuring one candidate.

    policy = MeasurePolicy(min_time_s=0.2)          # recorded with every result
    inp = MeasureInput(workload, trace_json)          # what to build and run
    samples = time_runs(run_once, policy)             # warmup, then repeat until min_time and min_repeats
    verdict = compare_outputs(outputs, references)    # (ok, max_error, message)

A candidate is timed only after its outputs (poisoned with NaN before the call) matched a float64
reference on fresh random inputs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tilegraph.runtime.launch import cache_flusher
from tilegraph.runtime.timer import measure
from tilegraph.schedule.trace import trace_hash
from tilegraph.te.dims import dims_array, value_of
from tilegraph.te.workload import Workload


@dataclass(frozen=True)
class MeasurePolicy:
    """How a candidate is checked and timed; stored as JSON with each record."""

    warmup: int = 2
    min_time_s: float = 0.2
    min_repeats: int = 5
    max_repeats: int = 10_000
    flush_cache: bool = False
    # The inputs a workload marks constant (a model's weights) flushed from every cache level before
    # each timed call, the others left as the previous call left them: closer to how a model runs
    # the kernel, where every other layer streams through the caches between two of its calls
    # (runtime/evict.py). Opt-in: it showed no gain end to end (docs/performance.md, 2026-12-07),
    # and its records are slower than hot ones, so a database mixing the two prefers the hot.
    evict_constants: bool = False
    num_threads: int | None = None
    rtol: float = 1e-3
    atol_scale: float = 1e-4
    timeout_s: float = 30.0
    warmup_s: float = 0.0  # warm-up goes on for this long after `warmup` runs (runtime/timer.py)
    # Candidates slower than the best so far get fewer samples (None: every one timed in full):
    # one whose check run took over time_once_over x the best (and at least SLOW_CHECK_MIN_S) gets
    # one warm sample (time_slow_candidate); one whose min_repeats samples are all over
    # stop_early_over x the best stops there, before min_time_s (time_runs). A best always has
    # its full samples: a candidate cut short is slower than the best by the cut's own rule.
    time_once_over: float | None = 3.0
    stop_early_over: float | None = 1.2

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.min_repeats < 1 or self.max_repeats < self.min_repeats:
            raise ValueError("MeasurePolicy: need warmup >= 0 and 1 <= min_repeats <= max_repeats")
        for name in ("time_once_over", "stop_early_over"):
            factor = getattr(self, name)
            if factor is not None and not (isinstance(factor, (int, float)) and factor > 1):
                raise ValueError(f"MeasurePolicy: {name} must be a number > 1 or None, got {factor!r}")
        if self.min_time_s < 0 or self.timeout_s <= 0 or self.warmup_s < 0:
            raise ValueError("MeasurePolicy: min_time_s and warmup_s must be >= 0 and timeout_s > 0")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"MeasurePolicy: num_threads must be a positive integer, got {self.num_threads}")

    def resolved(self) -> MeasurePolicy:
        """The same policy with num_threads fixed to a number, so the record says what was used."""
        if self.num_threads is not None:
            return self
        return MeasurePolicy(**{**asdict(self), "num_threads": os.cpu_count() or 1})

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class MeasureInput:
    workload: Workload
    trace_json: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def trace_hash(self) -> str:
        return trace_hash(self.trace_json)



# ---------------------------------------------------------------------------- target
def resolve_target(target: Any) -> Any:
    """A Target from "cpu", "cpu -cores=2", None or a Target; its `.fingerprint` keys the database."""
    from tilegraph.target import as_target

    return as_target(target)


def target_fingerprint(target: Any) -> str:
    return str(resolve_target(target).fingerprint)


# ---------------------------------------------------------------------------- inputs and references
def random_inputs(workload: Workload, seed: int) -> list[np.ndarray]:
    try:
        from tilegraph.testing import random_inputs as library_inputs
    except ImportError:
        library_inputs = None
    if library_inputs is not None:
        return [np.ascontiguousarray(a) for a in library_inputs(workload, seed)]
    rng = np.random.default_rng(seed)
    arrays = []
    for t in workload.inputs:
        if t is workload.dims_input:  # the run-time dims where the tuner measures (te/dims.py)
            arrays.append(dims_array(workload.dims, workload.tuning_dims))
            continue
        np_dtype = np.dtype(t.dtype.array_numpy)
        if t.dtype.is_float:
            arrays.append(rng.standard_normal(t.shape).astype(np_dtype))
        elif np_dtype.kind == "b":
            arrays.append(rng.integers(0, 2, t.shape).astype(np_dtype))
        else:
            arrays.append(rng.integers(-4, 5, t.shape).astype(np_dtype))
    return arrays


def library_reference(workload: Workload, inputs: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """tilegraph.testing's float64 reference, or None where it has none for this workload."""
    try:
        from tilegraph.testing import reference_outputs
    except ImportError:
        return None
    try:
        return [np.asarray(r, dtype=np.float64) for r in reference_outputs(workload, list(inputs))]
    except LookupError:
        return None


# Bumped whenever compare_outputs accepts what it refused before: a wrong answer recorded under an
# older check is checked again (TuneSession.measure_kernel). 2: a 16-bit float's last-place unit;
# 3: a dequantized grid computed in float32 (quantized_step's mean gap).
CHECK_VERSION = 3

# a 16-bit float output rounds the kernel's float32 result once: where that result moves within
# float32 rounding (an FMA contraction, a dot-product instruction's order) across a tie, the stored
# value moves one unit in the last place, 2**-7 of it relative for bfloat16, 2**-10 for float16
HALF_PRECISION_ULP = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


def valid_regions(workload: Workload, references: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each reference cut to its output's run-time extents at the dims the tuner measures with
    (te/dims.py: the elements past them are unspecified); as they are without dims."""
    if not workload.dims:
        return list(references)
    values = workload.tuning_dims
    out = []
    for t, ref in zip(workload.outputs, references):
        if t.bounds:
            ref = ref[tuple(slice(0, s if b is None else value_of(b, values)) for s, b in zip(t.shape, t.bounds))]
        out.append(ref)
    return out


def outputs_within_extents(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray],
                           storage: Sequence[tuple[int, ...]] | None) -> list[np.ndarray]:
    """A kernel with run-time dims (`storage`: its outputs' storage shapes, te/dims.py): each
    output in its storage shape (a GPU kernel's come back flat), cut to its reference's shape,
    which valid_regions cut to the run-time extents. Without dims (None): as they are, so
    compare_outputs still refuses an output of another shape."""
    if storage is None:
        return list(outputs)
    out = []
    for o, r, shape in zip(outputs, references, storage):
        if o.shape != tuple(shape) and o.size == math.prod(shape):
            o = o.reshape(shape)
        out.append(o[tuple(slice(0, n) for n in r.shape)] if o.ndim == r.ndim else o)
    return out


def compare_outputs(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray],
                    rtol: float = 1e-3, atol_scale: float = 1e-4) -> tuple[bool, float, str]:
    """allclose with atol scaled to the reference's magnitude (over its finite values). A non-finite
    output fails (poison left: an element never written) unless the reference holds the same
    non-finite value there (an inf of a max-pool window in padding, a NaN of a log of a negative).
    An 8- or 16-bit integer output is a quantized value (a float rounded to its steps): it may be
    one step from the float64 reference, where the kernel's float32 arithmetic before the rounding
    lands on the other side of a tie; wider integers (exact sums) get no such step. So may a float
    output whose reference lies on one grid (a dequantized tensor, (q - z) * s: quantized_step). A
    bfloat16 or float16 output may be one unit in its last place off (HALF_PRECISION_ULP)."""
    if len(outputs) != len(references):
        return False, float("inf"), f"kernel produced {len(outputs)} outputs, the reference {len(references)}"
    worst = 0.0
    for n, (out, ref) in enumerate(zip(outputs, references)):
        out64 = np.asarray(out, dtype=np.float64)
        ref64 = np.asarray(ref, dtype=np.float64)
        if out64.shape != ref64.shape:
            return False, float("inf"), f"output {n} has shape {out64.shape}, the reference {ref64.shape}"
        finite = np.isfinite(out64) & np.isfinite(ref64)
        same = (out64 == ref64) | (np.isnan(out64) & np.isnan(ref64))
        bad = int(np.count_nonzero(~finite & ~same))
        if bad:
            return False, float("inf"), (f"output {n} has {bad} non-finite values the reference does not have "
                                         "(elements never written?)")
        out64, ref64 = out64[finite], ref64[finite]
        scale = float(np.max(np.abs(ref64))) if ref64.size else 0.0
        err = np.abs(out64 - ref64)
        max_err = float(np.max(err)) if err.size else 0.0
        worst = max(worst, max_err)
        kind, size = np.asarray(out).dtype.kind, np.asarray(out).dtype.itemsize
        step = 1.0 if kind in "iu" and size <= 2 else quantized_step(ref64) if kind == "f" else 0.0
        relative = max(rtol, HALF_PRECISION_ULP.get(np.asarray(out).dtype.name, 0.0))
        if not np.all(err <= atol_scale * max(scale, 1e-30) + relative * np.abs(ref64) + step):
            return False, worst, f"output {n} differs from the reference: max abs error {max_err:.3g} (max |ref| {scale:.3g})"
    return True, worst, ""


def quantized_step(ref: np.ndarray, min_size: int = 64) -> float:
    """The step s of a reference whose values all lie on one grid v0 + k * s (a dequantized 8-bit
    tensor: at most a few hundred distinct values, k integers to 1e-3), else 0. Float data off a grid gives
    0: its smallest gap does not divide the others. Small tensors give 0 (too few values to tell),
    and so do integer steps (a floor or a round of floats is exact in float32 as well)."""
    if ref.size < min_size:
        return 0.0
    flat = ref.ravel()
    if np.unique(flat[::max(1, flat.size // 4096)]).size > 512:  # a cheap look first: most outputs are not
        return 0.0
    values = np.unique(flat)
    if values.size < 3 or values.size > 256:
        return 0.0
    step = float(np.min(np.diff(values)))
    if step <= 1e-6 * float(np.max(np.abs(values))) or step == round(step):
        return 0.0  # integer steps: floor/round/ceil of floats, exact in float32 too, get no slack
    # the mean gap, not the smallest: a grid computed in float32 ((q - z) * s rounded) has gaps
    # uneven in their last bits, and 255 of the smallest fall a tenth of a step short of the top
    span = float(values[-1] - values[0])
    step = span / round(span / step)
    k = (values - values[0]) / step
    return step if float(np.max(np.abs(k - np.round(k)))) <= 1e-3 else 0.0


# ---------------------------------------------------------------------------- timing
def time_runs(run_once: Callable[[], Any], policy: MeasurePolicy, best_s: float | None = None,
              evict: Callable[[], None] | None = None) -> list[float]:
    """Seconds per run, sampled as `Kernel.time()` samples (runtime/timer.py: measure): warm-up,
    fast runs batched per sample, until min_repeats samples and min_time_s seconds, at most
    max_repeats samples; with flush_cache, one cold run per sample, else with `evict` (what
    policy.evict_constants evicts: constant_evictor) one run per sample after it. With `best_s` (the best so far)
    and policy.stop_early_over, sampling stops at min_repeats samples once every sample is over
    stop_early_over x best_s: such a candidate is not the best, and its median is good enough to
    rank it."""
    flush = cache_flusher() if policy.flush_cache else evict  # a whole-cache flush evicts the constants too
    enough = None
    if policy.stop_early_over is not None and best_s is not None and best_s > 0:
        limit = policy.stop_early_over * best_s
        enough = lambda samples: min(samples) > limit  # noqa: E731
    result = measure(run_once, warmup=policy.warmup, min_time=policy.min_time_s, repeat=policy.min_repeats,
                     flush=flush, max_samples=policy.max_repeats, warmup_time=policy.warmup_s, enough=enough)
    return list(result.samples)


def constant_evictor(arrays: Sequence[np.ndarray], constant: Sequence[bool],
                     policy: MeasurePolicy) -> Callable[[], None] | None:
    """What evicts the constant ones of a candidate's input `arrays` before each timed call, where
    policy.evict_constants asks and some input is constant; None where nothing is to be evicted.
    Where this machine cannot flush given lines (runtime/evict.py), every cache is flushed instead."""
    if not policy.evict_constants or not any(constant):
        return None
    from tilegraph.runtime.evict import array_evictor

    return array_evictor([a for a, c in zip(arrays, constant) if c]) or cache_flusher()


# Below this a check run says little (first touch of the outputs, threads waking up) and full
# timing costs about min_time_s anyway: such a candidate is always timed in full.
SLOW_CHECK_MIN_S = 1e-3
# From this on, a cold run's extra (page faults on fresh outputs, threads waking) is lost in the
# run's own time: a slow candidate's check run is its sample.
SLOW_CHECK_IS_SAMPLE_S = 0.1


def time_slow_candidate(run_once: Callable[[], Any], check_s: float, best_s: float | None,
                        policy: MeasurePolicy, evict: Callable[[], None] | None = None) -> list[float] | None:
    """One warm sample for a candidate far slower than the best so far, or None: time it in full.

    The check run showed `check_s`; where that is over policy.time_once_over x `best_s`, one more
    run (a millisecond or more, since check_s is; the check run was its warm-up) decides: still
    over time_once_over x best, it is the candidate's only sample (it can never be the best: a best
    always has its full samples); under it, the check run was cold and the candidate is timed in
    full. A check run of SLOW_CHECK_IS_SAMPLE_S or more is the sample itself. A 3-second candidate
    beside a 4-ms best costs its one check run, not the eight runs of full timing."""
    if policy.time_once_over is None or best_s is None or best_s <= 0:
        return None
    limit = policy.time_once_over * best_s
    if check_s < SLOW_CHECK_MIN_S or check_s <= limit:
        return None
    if check_s >= SLOW_CHECK_IS_SAMPLE_S:
        return [check_s]
    sample = measure(run_once, warmup=0, min_time=0.0, repeat=1, number=1, flush=evict).samples[0]
    return [sample] if sample > limit else None


@contextlib.contextmanager
def spawn_without_main() -> Iterator[None]:
    """Start "spawn" workers without re-running the user's script in them.

    spawn normally re-imports __main__ in every worker, which re-runs a script that calls tg.tune at
    top level (no `if __name__ == "__main__"` guard) and recurses. Our workers only need tilegraph.
    """
    main = sys.modules.get("__main__")
    stand_in = types.ModuleType("__main__")
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def die_with_parent() -> None:
    """In a worker: ask Linux to kill us when the tuning process dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
