"""tilegraph: a tensor compiler that builds fast kernels in seconds.

Public API (the contract benchmarks and tools use):
    te, ops, workloads       define computations
    Workload, Schedule       what to compute, how to loop over it
    interpret                the IR's executable meaning (numpy in, numpy out)
"""

from tilegraph import te
from tilegraph.errors import BuildError, DatabaseError, LoweringError, ScheduleError, TilegraphError, WorkloadError
from tilegraph.schedule import Schedule, Trace
from tilegraph.te.workload import Workload

__version__ = "0.1.0"

__all__ = [
    "te", "Workload", "Schedule", "Trace", "ScheduleError", "BuildError", "DatabaseError", "LoweringError",
    "TilegraphError", "WorkloadError", "__version__",
]
