"""Whole-model tuning: tasks from a model's fusion groups, one budget spent by a task scheduler.

    report = tune_model(graph, groups, target, db, time_budget=180, num_threads=2, progress=display)

tasks.py extracts the tasks, scheduler.py spends the budget (Ansor's gradient, resumable),
report.py is the per-task table, vendor.py PyTorch's time for the same operator, progress.py the
terminal display. `tg.compile(model, time_budget=S)` calls tune_model and then builds the model
from the database the tuning filled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tilegraph.graph.fusion.partition import Group
from tilegraph.graph.ir import Graph
from tilegraph.graph.tuning.report import TaskRow, TuningReport, build_report
from tilegraph.graph.tuning.scheduler import AutoSlices, TaskScheduler, TaskState
from tilegraph.graph.tuning.tasks import Task, extract_tasks
from tilegraph.runtime.backends import backend_for
from tilegraph.target import Target

if TYPE_CHECKING:
    from tilegraph.tune.database import Database


def tune_model(graph: Graph, groups: Sequence[Group], target: Target, db: Database, time_budget: float | None = None,
               trials: int | None = None, num_threads: int | None = None,
               progress: Callable[[TaskScheduler, str], None] | None = None,
               slice_strategy: Callable[[Task, int], Any] | None = None,
               session_options: dict[str, Any] | None = None, plan: Any = None) -> TuningReport:
    """Tune the anchor workloads of `groups` into `db` under the budget (with a bucket `plan`,
    graph/buckets.py, each bucket of them); the per-task report."""
    from tilegraph.tune.hardware import hardware_model
    from tilegraph.tune.session import TuneSession

    tasks = extract_tasks(graph, groups, plan)
    with TuneSession(target, db, num_threads=num_threads, progress=False, **(session_options or {})) as session:
        threads = session.options.policy.resolved().num_threads or 1
        scheduler = TaskScheduler(tasks, session, time_budget, trials, slice_strategy)
        scheduler.run(progress)
    if not backend_for(session.target).is_gpu:
        peak = hardware_model(session.target).peak_flops(cores=threads)
    else:  # a GPU's peak does not depend on the host threads the runner uses
        from tilegraph.tune.hardware_gpu import gpu_hardware

        peak = gpu_hardware(session.target).peak_flops
    return build_report(scheduler, threads, peak)


__all__ = ["AutoSlices", "Task", "TaskRow", "TaskScheduler", "TaskState", "TuningReport", "extract_tasks", "tune_model"]
