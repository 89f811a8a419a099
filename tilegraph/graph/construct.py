"""Constructed schedules: a good kernel for every task in seconds, without measuring.

    constructed = construct_schedules(tasks, target, db)      # {workload key: trace}, Gensor's picks
    source = WithConstructed(db, constructed)                  # what the kernels are built from

Gensor's promise is kernels in seconds: its Markov walks over the construction graph, weighted by
the hardware model, end in a state the model ranks first (tune/strategy/gensor.py). A compile
takes that state's schedule for every task the database has no record of (no budget given, or a
budget that did not reach every task), instead of the plain default schedule. Measured on an AMD
EPYC (2 threads, batch 1), untuned models ran 4-13x slower than ONNX Runtime; ResNet-50 went from
485 ms to 69 ms (docs/performance.md).

Nothing is measured, so nothing is recorded: a constructed schedule is a default, like the plain
one it replaces, and a later tuning run measures it like any other candidate. It is built by the
same primitives and lowering as every tuned kernel (tests compare whole models built from them
against ONNX Runtime). Tasks under CONSTRUCT_MIN_FLOPS keep the plain schedule (a walk costs
up to a second and a kernel that small has nothing to win).

    before: conv2d task, no record   ->  default schedule (one loop nest, vectorised inner loop)
    after:  conv2d task, no record   ->  Gensor's top state: tiled for the caches, packed, parallel
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import logging
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tilegraph.errors import ScheduleError
from tilegraph.graph.kernels import best_schedule
from tilegraph.schedule.gpu_rows import is_row_operator
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.workload import Workload

log = logging.getLogger("tilegraph.graph.construct")

# Contractions (matmul, convolutions) and row operators (softmax, normalisations) are constructed
# from CONSTRUCT_MIN_FLOPS; other anchors (pooling, reductions over outer axes) from
# CONSTRUCT_MIN_OTHER_FLOPS: below it the plain schedule served them as well or better (ResNet-50's
# global average pool, 7 x 7 x 2048: 9 us plain, 23 us constructed). Small models are made of small
# tasks: on 9 reduced transformers/CNNs/audio models of the coverage study (AMD EPYC Zen 4, 2
# threads; each compiled both ways, raced in one run) the threshold 2e6 -> 3e4 ran wav2vec2 0.94 -> 0.46 ms, segformer 0.39 ->
# 0.18, a UNet block 0.17 -> 0.10, whisper's encoder 0.19 -> 0.13, none slower. Of the four reference
# models only MobileNet-V2 gains tasks (its four smallest depthwise convolutions). Row kernels
# beat the plain stage-by-stage schedule 1.3-3x.
CONSTRUCT_MIN_FLOPS = 3e4
CONSTRUCT_MIN_OTHER_FLOPS = 2e6
CONSTRUCTED = "gensor-construct"  # the strategy name a constructed schedule's (transient) record carries


def worth_constructing(workload: Workload) -> bool:
    """A contraction or row operator of at least CONSTRUCT_MIN_FLOPS, or any task of at least
    CONSTRUCT_MIN_OTHER_FLOPS."""
    flops = workload.flops()
    if flops >= CONSTRUCT_MIN_OTHER_FLOPS:
        return True
    return flops >= CONSTRUCT_MIN_FLOPS and (is_row_operator(workload) or _is_contraction(workload))


def _is_contraction(workload: Workload) -> bool:
    """Whether Gensor tiles it as a register micro-kernel (an operand misses a spatial axis: reuse)."""
    from tilegraph.tune.gensor.state import IterSpace

    try:
        return IterSpace.from_workload(workload).kind == "reuse"
    except Exception:  # noqa: BLE001 (a workload the analysis cannot read is not one it tiles)
        return False


def construct_schedules(tasks: Sequence[Any], target: Target, db: Any = None,
                        progress: Callable[[int, int], None] | None = None,
                        workers: int | None = None) -> dict[str, str]:
    """{workload key: trace JSON} of Gensor's best-ranked state for each task worth it
    (`worth_constructing`) that `db` has no record of on `target`. A task Gensor cannot construct
    keeps the default schedule (logged, never raised).

    Picks are cached on disk (cache_dir()/constructed, by workload, target fingerprint, versions
    and the hardware model's numbers), so compiling the model again constructs nothing; the
    searches of a model's tasks run in `workers` spawned processes (default: the target's cores)
    when there are several."""
    todo = [t for t in tasks if worth_constructing(t.workload)]
    todo = list({t.workload.key: t for t in todo if best_schedule(db, t.workload, target) is None}.values())
    out: dict[str, str] = {}
    missing = []
    hardware = _hardware_tag(target) if todo else ""
    for task in todo:
        cached = _cached(task.workload.key, target, hardware)
        if cached is not None:
            out[task.workload.key] = cached
        else:
            missing.append(task)
    workers = max(1, workers or target.num_cores or 1)
    began = time.perf_counter()
    if len(missing) >= PARALLEL_FROM and workers > 1:
        from tilegraph.tune.measure import die_with_parent, spawn_without_main

        context = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(min(workers, len(missing)), mp_context=context,
                                    initializer=die_with_parent) as pool:
            with spawn_without_main():  # the user's script is not re-run in the workers (no main guard needed)
                futures = {pool.submit(construct_one, t.workload, target): t for t in missing}
            for n, future in enumerate(cf.as_completed(futures)):
                _keep(futures[future], _result(future), target, hardware, out)
                if progress is not None:
                    progress(n + 1, len(missing))
    else:
        for n, task in enumerate(missing):
            _keep(task, construct_one(task.workload, target), target, hardware, out)
            if progress is not None:
                progress(n + 1, len(missing))
    if missing:
        log.info("construct: %d schedules in %.1f s (%d cached)", len(missing), time.perf_counter() - began,
                 len(todo) - len(missing))
    return out


# Tasks under SMALL_TASK_FLOPS walk a quarter as long: their spaces are small. On the 46 such tasks
# of four coverage models (wav2vec2, segformer, whisper, llama), 100 walks (0.4 s at most) picked
# the same state as 400 in 36 cases and, in the 10 others, kernels from 9% faster to 7% slower
# (alone, medians of 200 calls), in about 40% of the walk time.
SMALL_TASK_FLOPS = 2e6
SMALL_TASK_WALKS = 100
SMALL_TASK_WALK_S = 0.4
# Other tasks walk at most CONSTRUCT_WALKS times (and at most the strategy's 1.5 s). The walks used
# to end on the time alone: ResNet-50's 25 tasks walked 69-149 times each in 1.5 s on an AMD EPYC
# Zen 3 (2 cores), 39 CPU-seconds of a 85 s first compile, the picks depending on how busy the
# machine was. With the construction 1.8x faster since (the same picks for the same walks), 120
# walks are about as many as the time gave before; they took 0.7-1.5 s a task there (24 CPU-s in
# all), and end the same way on any machine fast enough to walk them within the time.
CONSTRUCT_WALKS = 120
PARALLEL_FROM = 4  # tasks to construct before worker processes pay for their start-up
CONSTRUCT_VERSION = 27  # bump when the construction changes: cached picks of older versions are not read


def construct_one(workload: Workload, target: Target) -> str | None:
    """Gensor's top-ranked schedule of `workload` (its trace), or None when it has none."""
    from tilegraph.tune.gensor.markov import MarkovConfig
    from tilegraph.tune.strategy.base import TuneContext
    from tilegraph.tune.strategy.gensor import GensorStrategy

    small = workload.flops() < SMALL_TASK_FLOPS
    config = (MarkovConfig(max_walks=SMALL_TASK_WALKS, time_budget_s=SMALL_TASK_WALK_S) if small
              else MarkovConfig(max_walks=CONSTRUCT_WALKS))
    try:
        ctx = TuneContext(workload, target, 0, None, trials_left=1)
        candidates = GensorStrategy(top_k=1, config=config).propose(ctx, 1)
    except Exception as err:  # construction is an optimisation: whatever fails, the default schedule serves
        log.info("construct: %s keeps its default schedule (%s: %s)", workload.op_name, type(err).__name__, err)
        return None
    if not candidates:  # said aloud: a whole class of tasks once fell back so unseen (reverse_compute_at)
        log.info("construct: %s keeps its default schedule (no state of Gensor's walks builds)", workload.op_name)
        return None
    return candidates[0].trace_json


def _result(future: cf.Future) -> str | None:
    try:
        return future.result()
    except Exception as err:  # a worker that died or raised: that task keeps its default schedule
        log.info("construct: a worker failed (%s: %s)", type(err).__name__, err)
        return None


def _keep(task: Any, trace: str | None, target: Target, hardware: str, out: dict[str, str]) -> None:
    if trace is None:
        return
    out[task.workload.key] = trace
    path = _cache_path(task.workload.key, target, hardware)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"workload": task.workload.key, "trace": trace}))
        tmp.replace(path)  # atomic: a reader never sees half a file
    except OSError as err:  # a read-only cache: the pick is used, just not kept
        log.debug("construct: cannot cache %s (%s)", path, err)


def _hardware_tag(target: Target) -> str:
    """A digest of the hardware model the walks read: measured once and cached here (not by every
    worker at once). A pick follows the model's numbers, so a remeasured model (`tilegraph info
    --remeasure`, a new HARDWARE_MODEL_VERSION) constructs again rather than serve picks made
    under the numbers it replaced."""
    from tilegraph.tune.hardware import HARDWARE_MODEL_VERSION, hardware_model

    try:
        numbers = hardware_model(target).to_json()
    except ValueError:  # a target without a CPU model (a GPU's walks read the device model)
        numbers = f"version {HARDWARE_MODEL_VERSION}"
    return hashlib.sha256(numbers.encode()).hexdigest()[:16]


def _cache_path(key: str, target: Target, hardware: str) -> Path:
    from tilegraph.config import cache_dir
    from tilegraph.version import __version__

    tag = f"{key}|{target.fingerprint}|{__version__}|{hardware}|{CONSTRUCT_VERSION}"
    return cache_dir() / "constructed" / f"{hashlib.sha256(tag.encode()).hexdigest()[:32]}.json"


def _cached(key: str, target: Target, hardware: str) -> str | None:
    try:
        data = json.loads(_cache_path(key, target, hardware).read_text())
    except (OSError, ValueError):  # none yet, or unreadable: construct it again
        return None
    trace = data.get("trace") if isinstance(data, dict) and data.get("workload") == key else None
    return trace if isinstance(trace, str) else None


class WithConstructed:
    """A tuning database seen through the constructed schedules: its own records first (what
    `best_schedule` and `top_k` return whenever it has any), then the constructed schedule of a
    workload it has none of. Everything else (recording BLP's measurements, reading) is the
    database's own."""

    def __init__(self, db: Any, constructed: Mapping[str, str]):
        self.db = db
        self.constructed = dict(constructed)

    def __getattr__(self, name: str) -> Any:
        if self.db is None:
            raise AttributeError(name)
        return getattr(self.db, name)

    def best_schedule(self, workload: Workload, target: Any = "cpu") -> Schedule | None:
        own = best_schedule(self.db, workload, target)
        if own is not None or workload.key not in self.constructed:
            return own
        try:
            return Schedule.replay(workload, self.constructed[workload.key])
        except ScheduleError:  # a cached pick that no longer replays: the default schedule serves
            return None

    def top_k(self, workload_key: str, target_fingerprint: str, k: int) -> list[Any]:
        from tilegraph.tune.database.record import Record

        own = self.db.top_k(workload_key, target_fingerprint, k) if self.db is not None and hasattr(self.db, "top_k") \
            else []
        if own or workload_key not in self.constructed or k < 1:
            return own
        return [Record(workload_key, target_fingerprint, self.constructed[workload_key], "ok", latency_s=math.inf,
                       meta={"strategy": CONSTRUCTED})]


__all__ = ["CONSTRUCTED", "CONSTRUCT_MIN_FLOPS", "CONSTRUCT_MIN_OTHER_FLOPS", "CONSTRUCT_VERSION", "WithConstructed",
           "construct_one", "construct_schedules", "worth_constructing"]
