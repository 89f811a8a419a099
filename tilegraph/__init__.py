"""tilegraph: a tensor compiler that builds fast kernels in seconds.

Public API (the contract benchmarks and tools use):
    te, ops, workloads       define computations
    Workload, Schedule       what to compute, how to loop over it
    interpret                the IR's executable meaning (numpy in, numpy out)
    build, Target            compile a schedule (or a workload's default schedule) to a Kernel
    tune                     search for the best schedule and keep every measurement
"""

from tilegraph import ops, te, workloads
from tilegraph.driver import build  # after tilegraph.build (the package) is loaded, so `build` stays the function
from tilegraph.errors import BuildError, DatabaseError, LoweringError, ScheduleError, TilegraphError, WorkloadError
from tilegraph.loop.interpret import interpret
from tilegraph.runtime.threads import get_num_threads, set_num_threads
from tilegraph.schedule import Schedule, Trace
from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.tune import tune  # bound last: `tg.tune` is the function, not the package

__version__ = "0.1.0"

__all__ = [
    "te", "ops", "workloads", "Workload", "Schedule", "Trace", "ScheduleError", "BuildError", "DatabaseError",
    "LoweringError", "TilegraphError", "WorkloadError", "__version__", "interpret",
    "Target", "build", "tune", "set_num_threads", "get_num_threads",
]

