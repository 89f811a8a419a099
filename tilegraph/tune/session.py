"""TuneSession: the one measurer. Every kernel tilegraph times to make a choice goes through it.

    with TuneSession("cpu", db, num_threads=2) as session:
        got = session.tune_slice(workload, strategy, trials=4, deadline=time.monotonic() + 10)
        got.measured, got.best_s, got.seconds
        kernel, record = session.best_kernel(workload)     # the fastest record that passes a re-check
        record = session.measure_kernel(workload, kernel, lambda: (inputs, references), meta={...})

Callers: `tg.tune` (one slice over the whole budget), the task scheduler (many short slices of
many tasks, graph/tuning/scheduler.py), the checked-only path (tune/checked_only.py: checked
under an emulator through `check`, never timed) and the model compiler's orchestration
(graph/fusion/choose.py: each fusion candidate through `measure_kernel`).

What every path gets: candidates built in worker processes (the orchestration's are built by
the model compiler and shipped as BuildResults), checked against a float64 reference on
fresh inputs with poisoned outputs, timed only after that, in the isolated runner (a crash or a
hang is a result, never an exception), and committed to the database as a Record in its own
transaction the moment it is measured. A record already in the database for the workload, target
and trace is never measured again: a resumed tuning run and a second compile of a model measure
nothing they measured before. The search loop itself is tune/search_loop.py.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.errors import TilegraphError
from tilegraph.runtime.backends import backend_for, require_runnable
from tilegraph.schedule.trace import BUILT_KERNEL, Instruction, Trace
from tilegraph.te.workload import Workload
from tilegraph.tune.builder import Builder, workload_args
from tilegraph.tune.database import Database, Record, built_kernels_fingerprint, open_database
from tilegraph.tune.kernel_loader import describe_kernel
from tilegraph.tune.measure import CHECK_VERSION, random_inputs, resolve_target
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.pipeline_profile import PipelineProfile
from tilegraph.tune.result import RunResult
from tilegraph.tune.retime import RETIME_ROUNDS, RETIME_TOP, retime_best
from tilegraph.tune.runner import Runner
from tilegraph.tune.search_loop import Silent, search_loop
from tilegraph.tune.strategy.base import SearchStrategy, TuneContext

log = logging.getLogger("tilegraph.tune")



@dataclass
class SliceResult:
    measured: int                 # new measurements this slice (recorded traces are not re-measured)
    best_s: float | None          # the workload's best ok latency after the slice (all runs)
    seconds: float                # wall time of the slice, search included
    counts: Counter[str] = field(default_factory=Counter)  # measurements by result kind


class TuneSession:
    """Builder, runner and database for many measurements; close() (or `with`) releases the workers.
    A target whose kernels run here but cannot be timed (an emulator) gets a session that only
    checks (`timed` False): tune_slice and measure_kernel refuse it, `check` serves it."""

    def __init__(self, target: Any = "cpu", db: Database | str | None = None, options: TuneOptions | None = None,
                 **option_fields: Any):
        self.options = (options or TuneOptions()).updated(**option_fields)
        self.target = resolve_target(target)
        self.timed = backend_for(self.target).timeable
        require_runnable(self.target, timed=self.timed)
        self.fingerprint = str(self.target.fingerprint)
        self.db = open_database(db) if self.timed else None
        build_target = target if isinstance(target, str) else self.target
        opts = self.options
        self._own = (opts.builder is None, opts.runner is None)
        self.connection: Any = None
        if opts.cluster is not None and self.timed:
            self.builder, self.runner = self._on_cluster(opts, build_target)
        else:
            self.builder = opts.builder or Builder(opts.build_workers, opts.build_timeout_s, build_target)
            self.runner = opts.runner or Runner(opts.policy, opts.reference, target=build_target)
        self.measured = 0  # kernels timed by this session (recorded ones excluded)
        self.profile = PipelineProfile()  # where the search loops' time went (tune/pipeline_profile.py)

    # ------------------------------------------------------------------ the database's view
    def _database(self) -> Database:
        if self.db is None:
            raise TilegraphError(f"kernels for {self.target} cannot be timed here; this session only checks them")
        return self.db

    def measured_hashes(self, workload: Workload) -> set[str]:
        return self._database().measured_hashes(workload.key, self.fingerprint)

    def records(self, workload: Workload) -> list[Record]:
        return list(self._database().records(workload.key, self.fingerprint))

    def best(self, workload: Workload) -> Record | None:
        return self._database().best(workload.key, self.fingerprint)

    # ------------------------------------------------------------------ searching
    def tune_slice(self, workload: Workload, strategy: SearchStrategy, trials: int | None, deadline: float | None = None,
                   seed: int | None = None, progress: Any = None, budget_given: bool | None = None) -> SliceResult:
        """Up to `trials` new measurements of `workload` proposed by `strategy` (which keeps its
        state between slices), stopping at `deadline` (time.monotonic()) after at least one."""
        db = self._database()
        start = time.monotonic()
        db.commit_workload(workload)
        ctx = TuneContext(workload, self.target, self.options.seed if seed is None else seed, db,
                          self.measured_hashes(workload), trials, deadline, self.options.num_threads,
                          budget_given=budget_given)
        counts: Counter[str] = Counter()
        search_loop(strategy, ctx, self.builder, self.runner, db, self.options.batch_size, counts,
                    progress or Silent(), start, self.profile)
        self.measured += sum(counts.values())
        best = self.best(workload)
        return SliceResult(sum(counts.values()), None if best is None else best.latency_s,
                           time.monotonic() - start, counts)

    def retime_best(self, workload: Workload, k: int = RETIME_TOP, rounds: int = RETIME_ROUNDS,
                    deadline: float | None = None) -> list[Record]:
        """The workload's k best records timed again against each other in alternating rounds, and
        recorded so (tune/retime.py); the re-timed records, best first. A round starts only while
        half of it fits before `deadline` (time.monotonic())."""
        settled = retime_best(self._database(), self.builder, self.runner, workload, self.fingerprint, k, rounds,
                              seed=self.options.seed, deadline=deadline)
        self.measured += sum(r.meta.get("retimed", 0) for r in settled)  # runs per record: its rounds
        return settled

    def best_kernel(self, workload: Workload) -> tuple[Any, Record]:
        """The fastest recorded kernel (earlier runs' records count) that passes one more check
        here, built in this process: what tg.tune returns."""
        candidates = self._database().top_k(workload.key, self.fingerprint, 5)
        if not candidates:
            counts = Counter(r.kind for r in self.records(workload))
            summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing measured"
            raise TilegraphError(f"no candidate for {workload.op_name} passed its correctness check ({summary})")
        for rec in candidates:
            kernel = self.builder.kernel(workload, rec.trace_json, rec.meta)
            verdict = self.check(workload, kernel, seed=int(rec.created) % 9973 + 17)
            if verdict.ok:
                return kernel, rec
            log.warning("best record %s failed its re-check (%s); trying the next", rec.trace_hash, verdict.message)
        raise TilegraphError(f"no recorded kernel for {workload.op_name} passed its re-check on this machine")

    def check(self, workload: Workload, kernel: Any, seed: int) -> RunResult:
        """One check of a kernel built in this process, on fresh random inputs; nothing timed or stored."""
        inputs = random_inputs(workload, seed)
        storage = [t.shape for t in workload.outputs] if workload.dims else None
        return self.runner.check_here(kernel, inputs, self.runner.references(workload, inputs), storage)

    # ------------------------------------------------------------------ kernels built elsewhere
    def measure_kernel(self, workload: Workload, kernel: Any,
                       check_data: Callable[[], tuple[Sequence[np.ndarray], Sequence[np.ndarray]]],
                       meta: dict[str, Any] | None = None, fresh: bool = False) -> Record:
        """The record of a kernel built outside a schedule (a fused kernel of the model compiler):
        the recorded one if this exact binary was measured before at this thread count, else a
        new measurement: `check_data()` gives (inputs, references), called only then; the kernel
        is checked against them, then timed in the runner. A kernel that fails its check, crashes
        or hangs gives a failed record, never an exception. Such records are kept under
        built_kernels_fingerprint(target), apart from the schedules. `fresh`: measured again
        whatever is recorded; the faster of the two measurements is kept (a busy machine only adds
        time) with `meta` merged into it, in place of the old record (one record per binary)."""
        db = self._database()
        fingerprint = built_kernels_fingerprint(self.fingerprint)
        trace_json = built_kernel_trace(workload.key, kernel, self.runner.policy.num_threads)
        recorded = db.record(workload.key, fingerprint, trace_json)
        if recorded is not None and not fresh and not _stale_verdict(recorded):
            return recorded
        try:
            build = describe_kernel(kernel, self.target, workload_args(workload), 0.0)
        except ValueError as e:
            run = RunResult("build_error", str(e))
        else:
            inputs, references = check_data()
            run = self.runner.run_on(build, inputs, references)
            self.measured += 1
        record = Record.from_run(workload.key, fingerprint, trace_json, run, policy=self.runner.policy,
                                 meta={"source": "orchestration", **(meta or {})})
        if record.kind == "wrong_answer":
            record = replace(record, meta={**record.meta, "check": CHECK_VERSION})
        db.commit_workload(workload)
        if recorded is None:
            db.commit_record(record)
            return record
        if record.ok and recorded.ok and (recorded.latency_min_s or recorded.latency_s or 0.0) <= (
                record.latency_min_s or record.latency_s or 0.0):
            record = replace(recorded, meta={**recorded.meta, **(meta or {})})
        db.replace_record(record)
        return record

    # ------------------------------------------------------------------ lifetime
    def _on_cluster(self, opts: TuneOptions, build_target: Any) -> tuple[Any, Any]:
        """The Ray builder and runner (tune/cluster/); Ray is imported only here."""
        from tilegraph.tune.cluster.builder import RayBuilder
        from tilegraph.tune.cluster.connect import connect
        from tilegraph.tune.cluster.runner import RayRunner

        if self.target.kind != "cpu":
            raise TilegraphError(f"tuning on a cluster measures CPU targets only, not {self.target.kind}")
        self.connection = connect(opts.cluster)
        try:
            runner = opts.runner or RayRunner(self.connection, opts.policy, opts.reference, target=build_target)
        except BaseException:
            self.connection.close()
            raise
        connection = self.connection

        def build_nodes() -> list[str]:  # alive nodes with a runner for the target: their toolchain is its
            alive = connection.nodes()
            return [n for n in getattr(runner, "nodes", alive) if n in alive]

        builder = opts.builder or RayBuilder(connection, build_target, opts.build_timeout_s, build_nodes)
        slots = getattr(runner, "slots", 1)
        if opts.batch_size < slots:  # a round measures at most a batch: give every runner a candidate
            self.options = replace(self.options, batch_size=slots)
        log.info("tuning on the cluster at %s: %d runner(s) for %s", opts.cluster, slots, self.fingerprint)
        for info in getattr(runner, "skipped", ()):
            log.warning("cluster node %s (%s) gets no candidates: its machine or tilegraph differs from this one's",
                        info.get("host"), info.get("target"))
        return builder, runner

    def close(self) -> None:
        if self._own[0]:
            self.builder.close()
        if self._own[1]:
            self.runner.close()
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def __enter__(self) -> TuneSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def built_kernel_trace(workload_key: str, kernel: Any, threads: int | None) -> str:
    """The trace naming a kernel built outside a schedule: its binary (content-addressed: the
    source and the compiler's flags) and the threads it is timed with. It identifies the record
    and never replays (Schedule.replay refuses it by name)."""
    lib_path = getattr(kernel, "lib_path", None)  # build cache: <content hash of source and flags>/kernel.so
    library = (Path(str(lib_path)).parent.name if lib_path
               else hashlib.sha256(str(getattr(kernel, "source", "")).encode()).hexdigest()[:40])
    inputs = {"library": library, "entry": str(getattr(kernel, "entry", "")), "threads": int(threads or 0)}
    return Trace(workload_key, (Instruction(BUILT_KERNEL, inputs),)).to_json()


def _stale_verdict(record: Record) -> bool:
    """A wrong answer recorded under an older check (compare_outputs since tolerates more, as one
    bfloat16 ulp): the binary is checked again rather than refused for good."""
    return record.kind == "wrong_answer" and int(record.meta.get("check", 1)) < CHECK_VERSION


__all__ = ["SliceResult", "TuneSession", "built_kernel_trace"]

