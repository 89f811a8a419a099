"""The compile driver: schedule (or workload) -> lowered IR -> C -> shared library -> Kernel.

    kernel = tg.build(sch)                  # a Schedule, as scheduled
    kernel = tg.build(wl, target="cpu")     # a Workload: default_schedule(wl, target) first
    c = kernel(a, b); kernel.source; kernel.lowered

A Workload without a recorded schedule gets `schedule/defaults.py`'s default (CPU or GPU). `db`
is a tuning database object (anything with `best_schedule(workload, target)`); `tg.build` also
accepts the path of one and opens it read-only (the database lives in tune/, above this layer).
"""

from __future__ import annotations

from typing import Any

from tilegraph.runtime.backends import backend_for
from tilegraph.runtime.launch import KernelProtocol
from tilegraph.schedule.defaults import default_gpu_schedule, default_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target, as_target
from tilegraph.te.workload import Workload


def build(obj: Schedule | Workload, target: str | Target = "cpu", db: Any = None) -> KernelProtocol:
    """Compile a Schedule (as is) or a Workload (with `db`'s best schedule when given, else the
    target's default schedule) into a callable kernel (runtime/launch.py's protocol), through the
    target kind's backend (runtime/backends.py)."""
    tgt = as_target(target)
    backend = backend_for(tgt)
    if isinstance(obj, Workload):
        sch = _schedule_from_db(obj, tgt, db) if db is not None else None
        sch = sch if sch is not None else backend.default_schedule(obj, tgt)
    elif isinstance(obj, Schedule):
        sch = obj
    else:
        raise TypeError(f"build expects a Schedule or a Workload, got {type(obj).__name__}")
    return backend.build(sch, tgt)


def _schedule_from_db(wl: Workload, target: Target, db: Any) -> Schedule | None:
    """The best recorded schedule of `wl` on `target`: `db` is a tuning database (anything with
    `best_schedule(workload, target)`; `tg.build` opens a path for you)."""
    lookup = getattr(db, "best_schedule", None)
    if lookup is None:
        raise TypeError(f"db must be a tuning database (tg.build also takes the path of one), got {type(db).__name__}")
    return lookup(wl, target)


__all__ = ["build", "default_schedule", "default_gpu_schedule"]
