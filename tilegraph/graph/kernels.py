"""One kernel per graph node: the node lowered to a te Workload, built from the database's best
record or the default schedule; identical workloads (by structural key) share one kernel.

    spec = kernel_spec(graph, node)    # KernelSpec(workload, arguments=graph tensors in parameter order)
    built = build_kernels(specs, target, db, workers=2)   # {workload key: BuiltKernel}

A size-1 constant operand of an elementwise op becomes a literal of the kernel (BERT's `/ 8.0`
compiles to one kernel taking one tensor). Builds run on a thread pool: lowering is Python, the
C compiler runs as parallel worker processes, and the build cache makes a second compile of the
same model a lookup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tilegraph import driver, te
from tilegraph.errors import GraphError, TilegraphError
from tilegraph.graph.build_workers import build_workers
from tilegraph.graph.builder import scalar_of
from tilegraph.graph.dims import dims_argument
from tilegraph.graph.ir import Graph, Node
from tilegraph.graph.ops.registry import op_def, te_shape
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.workload import Workload

if TYPE_CHECKING:
    from tilegraph.tune.database import Database


@dataclass(frozen=True)
class KernelSpec:
    node: Node
    workload: Workload
    arguments: tuple[str, ...]  # graph tensors bound to the kernel's inputs, in order

    @property
    def key(self) -> str:
        return self.workload.key

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.node.name,)

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.node.outputs

    @property
    def label(self) -> str:
        return self.node.name

    def at(self, values: Mapping[str, int]) -> KernelSpec:
        """This kernel in the bucket of its run-time dims at `values` (graph/buckets.py)."""
        return replace(self, workload=self.workload.at(values))

    def lookup(self, db: Database | None, target: Target) -> Any:
        """The database's best schedule of this workload, or None (called on the compiling thread:
        a SQLite connection belongs to the thread that opened it)."""
        return best_schedule(db, self.workload, target)

    def build(self, target: Target, schedule: Any = None) -> tuple[Any, bool]:
        """(kernel, tuned): from `schedule` (a lookup's result), else the default schedule."""
        return driver.build(schedule if schedule is not None else self.workload, target), schedule is not None


def best_schedule(db: Database | None, workload: Workload, target: Target) -> Any:
    if db is None:
        return None
    try:
        return db.best_schedule(workload, target)
    except TilegraphError:
        return None  # an unreadable record never stops a compile: the default schedule serves


def best_schedules(db: Database | None, workload: Workload, target: Target, k: int) -> list[Any]:
    """Up to k schedules of the database's fastest records of `workload` that replay, fastest first
    (a database without top_k: its best schedule alone)."""
    if db is None:
        return []
    if not hasattr(db, "top_k"):
        best = best_schedule(db, workload, target)
        return [] if best is None else [best]
    try:  # a workload with constants and no records of its own: its plain workload's (base.best_schedule)
        records = db.top_k(workload.key, str(target.fingerprint), k) or \
            (db.top_k(workload.plain.key, str(target.fingerprint), k) if workload.constants else [])
    except TilegraphError:
        return []  # an unreadable database never stops a compile: the default schedule serves
    schedules = []
    for record in records:
        try:
            schedules.append(Schedule.replay(workload, record.trace_json))
        except TilegraphError:
            continue  # a stale record: the next one
    return schedules


@dataclass
class BuiltKernel:
    kernel: Any  # runtime Kernel
    tuned: bool  # built from a database record (else the default schedule)


def kernel_spec(graph: Graph, node: Node) -> KernelSpec:
    """The workload computing `node` and the graph tensors it takes."""
    placeholders: dict[str, te.Tensor] = {}
    outs = lower_node(graph, node, placeholders, prefix="in")
    for out, name in zip(outs, node.outputs):
        expected = te_shape(graph.type_of(name).shape)
        if tuple(out.shape) != expected or out.dtype.name != graph.type_of(name).dtype:
            raise GraphError(f"node {node.name!r} ({node.op}) lowers to {out.dtype}{list(out.shape)}, "
                             f"its type is {graph.type_of(name)} (a lowering bug)")
    # the graph's constants (weights) are the workload's: tuned as the model runs them, packed once
    constants = [i for i, name in enumerate(placeholders) if name in graph.constants]
    workload = Workload(list(placeholders.values()), list(outs), name=node.op, constants=constants)
    return KernelSpec(node, workload, with_dims_argument(tuple(placeholders), workload))


def with_dims_argument(arguments: tuple[str, ...], workload: Workload) -> tuple[str, ...]:
    """A kernel's step arguments: the graph tensors, then its dims input where it has one."""
    return (*arguments, dims_argument(workload.dims)) if workload.dims else arguments


def lower_node(graph: Graph, node: Node, env: dict[str, Any], prefix: str,
               placeholders: dict[str, te.Tensor] | None = None,
               extents: Mapping[str, tuple[Any, ...]] | None = None) -> list[Any]:
    """`node` lowered to te: inputs from `env` (graph tensor -> te tensor), size-1 constants as
    literals where the op takes scalars, other tensors as new placeholders `<prefix><n>` (added
    to `env` and to `placeholders`, which defaults to `env`), over their run-time extents where
    they have some (`extents`, default the graph's: graph/dims.py)."""
    op = op_def(node.op)
    placeholders = env if placeholders is None else placeholders
    extents = graph.extents if extents is None else extents
    args: list[Any] = []
    for name in node.inputs:
        if not name:
            args.append(None)
            continue
        if name in env:
            args.append(env[name])
            continue
        scalar = scalar_of(graph, name) if op.scalar_args else None
        if scalar is not None:
            args.append(scalar)
            continue
        t = graph.type_of(name)
        shape = extents.get(name) or te_shape(t.shape)
        placeholders[name] = env[name] = te.placeholder(shape, t.dtype, name=f"{prefix}{len(placeholders)}")
        args.append(env[name])
    while args and args[-1] is None:
        args.pop()
    try:
        return op.lower(node, args)
    except (ValueError, TypeError) as e:
        raise GraphError(f"node {node.name!r} ({node.op}) cannot be lowered: {e}") from None


def _build_one(spec: Any, target: Target, schedule: Any) -> BuiltKernel:
    try:
        kernel, tuned = spec.build(target, schedule)
    except TilegraphError as e:
        nodes = ", ".join(spec.nodes)
        raise type(e)(f"building the kernel of {nodes}: {e}") from None
    return BuiltKernel(kernel, tuned)


def build_kernels(specs: Sequence[Any], target: Target, db: Database | None = None, workers: int | None = None,
                  progress: Any = None, errors: dict[str, TilegraphError] | None = None) -> dict[str, BuiltKernel]:
    """Build each distinct workload once, `workers` at a time; {workload key: BuiltKernel}.

    `specs` are KernelSpecs or fusion.FusedSpecs (anything with key, nodes and build). With
    `errors` given, a failed build is recorded there (by key) instead of raised."""
    unique: dict[str, Any] = {}
    for spec in specs:
        unique.setdefault(spec.key, spec)
    workers = workers or max(1, min(len(unique), os.cpu_count() or 1))
    built: dict[str, BuiltKernel] = {}
    with build_workers(target, workers), ThreadPoolExecutor(max_workers=workers) as pool:
        schedules = {key: spec.lookup(db, target) for key, spec in unique.items()}  # this thread: SQLite
        futures = {key: pool.submit(_build_one, spec, target, schedules[key]) for key, spec in unique.items()}
        for key, future in futures.items():
            try:
                built[key] = future.result()
            except TilegraphError as e:
                if errors is None:
                    raise
                errors[key] = e
            if progress is not None:
                progress(len(built), len(unique))
    return built


__all__ = ["KernelSpec", "BuiltKernel", "best_schedule", "best_schedules", "kernel_spec", "build_kernels", "lower_node"]
