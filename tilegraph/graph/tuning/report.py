"""TuningReport: what whole-model tuning did, per task and for the model.

    report = model.tuning                 # after tg.compile(model, time_budget=S)
    print(report.table())                 # task, occurrences, share, before/after, GFLOP/s, % peak, ...
    report.to_json()                      # {"model": {...}, "tasks": [{...}, ...]}
    report.add_vendor_times(threads=2)    # PyTorch's kernel for the same operator, where it has one

Shares are of the tuned tasks' total (occurrences x best latency, each task timed alone), not of
the measured model latency: fused epilogues and injective kernels are not in it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TaskRow:
    task: str
    op: str
    key: str
    occurrences: int
    flops: float
    share: float                 # of the tasks' total after tuning
    before_s: float | None       # the default schedule
    after_s: float | None        # the best record
    gflops: float | None
    peak_pct: float | None       # of the machine's fp32 peak at the threads measured
    measured: int                # records of this task (earlier runs included)
    measured_now: int            # measurements taken by this run
    seconds: float               # this run's tuning time on the task
    status: str                  # "" or why the task got no more slices
    vendor: str | None = None    # e.g. "torch"
    vendor_s: float | None = None
    vendor_note: str = ""        # why there is no vendor time

    @property
    def speedup(self) -> float | None:
        return None if not (self.before_s and self.after_s) else self.before_s / self.after_s

    @property
    def vs_vendor(self) -> float | None:
        return None if not (self.vendor_s and self.after_s) else self.vendor_s / self.after_s


@dataclass
class TuningReport:
    rows: list[TaskRow]
    budget_s: float | None
    trials: int | None
    elapsed_s: float
    stop_reason: str
    threads: int
    peak_gflops: float
    tasks_before_s: float        # sum of occurrences x default latency (tasks measured)
    tasks_after_s: float         # sum of occurrences x best latency
    workloads: dict[str, Any] = field(default_factory=dict, repr=False)  # task key -> Workload

    @property
    def measured(self) -> int:
        return sum(r.measured for r in self.rows)

    @property
    def measured_now(self) -> int:
        return sum(r.measured_now for r in self.rows)

    def add_vendor_times(self, threads: int | None = None, vendor: str = "torch") -> None:
        """Time `vendor`'s kernel for each task's operator on random inputs (median of warm runs);
        a task without an equivalent gets vendor_note. Call it after tuning, never during."""
        from tilegraph.graph.tuning.vendor import vendor_time

        for row in self.rows:
            row.vendor = vendor
            row.vendor_s, row.vendor_note = vendor_time(vendor, self.workloads[row.key], threads or self.threads)

    def table(self) -> str:
        """The per-task table as aligned text, largest share first, then a totals line."""
        head = ("task", "occ", "share", "before ms", "after ms", "speedup", "GFLOP/s", "% peak", "meas",
                "torch ms", "vs torch", "status")
        lines = [head]
        for r in sorted(self.rows, key=lambda r: -r.share):
            lines.append((r.task, str(r.occurrences), f"{r.share:.1%}", _ms(r.before_s), _ms(r.after_s),
                          _x(r.speedup), _f(r.gflops), _f(r.peak_pct), f"{r.measured_now}/{r.measured}",
                          _ms(r.vendor_s) if r.vendor_s else (r.vendor_note and "-") or "", _x(r.vs_vendor),
                          r.status))
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        text = ["  ".join(c.ljust(w) if i in (0, len(head) - 1) else c.rjust(w)
                          for i, (c, w) in enumerate(zip(line, widths))).rstrip() for line in lines]
        budget = "no time budget" if self.budget_s is None else f"budget {self.budget_s:.0f} s"
        text.append(f"tasks' total {self.tasks_before_s * 1e3:.2f} ms -> {self.tasks_after_s * 1e3:.2f} ms "
                    f"({_x(self.tasks_before_s / self.tasks_after_s if self.tasks_after_s else None)}); "
                    f"{self.measured_now} measured now, {self.measured} recorded; tuned {self.elapsed_s:.1f} s "
                    f"({budget}); {self.stop_reason}")
        return "\n".join(text)

    def to_json(self) -> dict[str, Any]:
        tasks = []
        for r in self.rows:
            d = asdict(r)
            d.update(speedup=r.speedup, vs_vendor=r.vs_vendor)
            tasks.append(d)
        model = {"tasks": len(self.rows), "budget_s": self.budget_s, "trials": self.trials,
                 "tuning_s": self.elapsed_s, "stop_reason": self.stop_reason, "threads": self.threads,
                 "peak_gflops": self.peak_gflops, "measured": self.measured, "measured_now": self.measured_now,
                 "tasks_before_s": self.tasks_before_s, "tasks_after_s": self.tasks_after_s}
        return {"model": model, "tasks": tasks}


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.3f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def build_report(scheduler: Any, threads: int, peak_flops: float) -> TuningReport:
    """The report of a finished TaskScheduler run."""
    total = scheduler.estimate_s
    rows = []
    for st in scheduler.states:
        t = st.task
        after = st.best_s
        gflops = t.flops / after / 1e9 if after else None
        rows.append(TaskRow(
            t.name, t.op, t.key, len(t.nodes), t.flops, (t.weight * after / total) if (after and total) else 0.0,
            st.before_s, after, gflops, (gflops * 1e9 / peak_flops * 100) if (gflops and peak_flops) else None,
            st.measured, st.measured_now, st.seconds, st.dead or ("" if st.slices else "not tuned (budget)")))
    return TuningReport(rows, scheduler.time_budget, scheduler.trials, scheduler.elapsed_s, scheduler.stop_reason,
                        threads, peak_flops / 1e9, scheduler.untuned_s, total,
                        {st.task.key: st.task.workload for st in scheduler.states})


__all__ = ["TaskRow", "TuningReport", "build_report"]
