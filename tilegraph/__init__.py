"""tilegraph: a tensor compiler that builds fast kernels in seconds.

Public API (the contract benchmarks and tools use):
    te, ops, workloads       define computations
    Workload, Schedule       what to compute, how to loop over it
    interpret                the IR's executable meaning (numpy in, numpy out)
    build, Target            compile a schedule (or a workload's default schedule) to a Kernel
    tune                     search for the best schedule and keep every measurement
"""

import os as _os
from typing import Any as _Any

import tilegraph.build.compile  # noqa: F401 (the package first: `tg.build` below must stay the function)
from tilegraph import driver as _driver
from tilegraph import ops, te, workloads
from tilegraph.errors import BuildError, DatabaseError, LoweringError, ScheduleError, TilegraphError, WorkloadError
from tilegraph.loop.interpret import interpret
from tilegraph.runtime.threads import get_num_threads, set_num_threads
from tilegraph.schedule import Schedule, Trace
from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.database import open_database as _open_database
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.tune import tune  # bound last: `tg.tune` is the function, not the package
from tilegraph.version import __version__


def build(obj: Schedule | Workload, target: str | Target = "cpu", db: _Any = None) -> _Any:
    """Compile a Schedule (as is) or a Workload (with the best schedule `db` records for it, else
    the default schedule) into a callable Kernel. `db` is a tuning database or the path of one
    (opened read-only). Bound after the package `tilegraph.build` is loaded, so `tg.build` is this."""
    if isinstance(db, (str, _os.PathLike)):
        db = _open_database(db, readonly=True)
    return _driver.build(obj, target, db)


__all__ = [
    "te", "ops", "workloads", "Workload", "Schedule", "Trace", "ScheduleError", "BuildError", "DatabaseError",
    "LoweringError", "TilegraphError", "WorkloadError", "__version__", "interpret",
    "Target", "build", "tune", "TuneOptions", "set_num_threads", "get_num_threads",
]

