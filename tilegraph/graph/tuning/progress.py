"""The whole-model tuning display: tasks done, the tasks' current total, time left.

    with TuningProgress("resnet50", time_budget=180) as show:
        tune_model(..., progress=show)

On a terminal a rich progress bar (elapsed and remaining time against the budget); otherwise one
plain line per slice on stderr, so logs of a CI run or `tilegraph compile ... 2> log` say the same.
`enabled=False` shows nothing.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class TuningProgress:
    def __init__(self, label: str, time_budget: float | None, enabled: bool = True, stream: TextIO | None = None):
        self.label = label
        self.budget = time_budget
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> TuningProgress:
        if self.enabled and self.stream.isatty() and self.budget is not None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(file=self.stream),
                                 transient=True)
            self._bar.start()
            self._task = self._bar.add_task(f"tuning {self.label}", total=float(self.budget), status="")
        return self

    def __call__(self, scheduler: Any, message: str) -> None:
        if not self.enabled:
            return
        tuned = sum(1 for st in scheduler.states if st.slices)
        n = len(scheduler.states)
        estimate = scheduler.estimate_s
        untuned = scheduler.untuned_s
        status = (f"{tuned}/{n} tasks, {scheduler.total_measured} measured, tasks' total "
                  f"{estimate * 1e3:.2f} ms (untuned {untuned * 1e3:.2f} ms)")
        if self._bar is not None:
            self._bar.update(self._task, completed=min(scheduler.elapsed_s, self.budget or 0), status=status)
            return
        eta = "" if scheduler.time_left_s is None else f", {max(0.0, scheduler.time_left_s):.0f} s left"
        print(f"[{scheduler.elapsed_s:6.1f} s] {status}{eta}: {message}", file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


__all__ = ["TuningProgress"]
