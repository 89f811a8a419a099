"""tilegraph: a tensor compiler that builds fast kernels in seconds.

Public API (the contract benchmarks and tools use):
    te, ops, workloads       define computations
    Workload, Schedule       what to compute, how to loop over it
    interpret                the IR's executable meaning (numpy in, numpy out)
    build, Target            compile a schedule (or a workload's default schedule) to a Kernel
    tune                     search for the best schedule and keep every measurement
    tune_buckets             one tuned kernel per bucket of a run-time dim (te/dims.py), dispatched by its value
    graph, compile, load     whole models: a graph from ONNX or PyTorch, compiled into kernels over
                             one memory plan; saved and loaded without recompiling
"""

import os as _os
from typing import Any as _Any

import tilegraph.build.compile  # noqa: F401 (the package first: `tg.build` below must stay the function)
from tilegraph import driver as _driver
from tilegraph import graph, ops, te, workloads
from tilegraph.errors import (
    BuildError,
    DatabaseError,
    GraphError,
    LoweringError,
    ModelFileError,
    ScheduleError,
    TilegraphError,
    UnsupportedOpError,
    WorkloadError,
)
from tilegraph.loop.interpret import interpret
from tilegraph.runtime.threads import get_num_threads, set_num_threads
from tilegraph.schedule import Schedule, Trace
from tilegraph.target import Target
from tilegraph.te.workload import Workload
from tilegraph.tune.buckets import tune_buckets
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


def compile(model: _Any, target: str | Target = "cpu", db: _Any = None, time_budget: float = 0.0,
            example_inputs: _Any = None, **options: _Any) -> _Any:
    """Compile a model (a tg.graph.Graph, an ONNX path or ModelProto, or a torch.nn.Module with
    example_inputs) into a CompiledModel: graph passes, fused kernels from `db`'s best records
    (a database or its path) or default schedules, a static memory plan. `time_budget=S` seconds
    (or `trials=N`) first tunes the model's tasks into `db` (the default database when None) with
    the task scheduler; `model.tuning.table()` then reports per task. An ONNX model whose shapes
    depend on input values (a reduction's axes given as an input) compiles to a SpecializedModel,
    one CompiledModel per value set it runs with; `values={...}` binds them up front. Other
    options: graph.compile.compile_model."""
    from tilegraph.graph.compile import compile_model

    return compile_model(model, target, db, time_budget, example_inputs, **options)


def load(path: str | _os.PathLike, target: str | Target = "cpu") -> _Any:
    """A CompiledModel saved with `model.save(path)`, loaded without compiling (same target only)."""
    from tilegraph.graph.serialize import load_model

    return load_model(path, target)


__all__ = [
    "te", "ops", "workloads", "Workload", "Schedule", "Trace", "ScheduleError", "BuildError", "DatabaseError",
    "LoweringError", "TilegraphError", "WorkloadError", "__version__", "interpret",
    "Target", "build", "tune", "tune_buckets", "TuneOptions", "set_num_threads", "get_num_threads",
    "graph", "compile", "load", "GraphError", "UnsupportedOpError", "ModelFileError",
]

