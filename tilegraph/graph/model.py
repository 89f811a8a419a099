"""CompiledModel: a graph's kernels, run in order over one preallocated arena.

    outs = model(x)                       # numpy arrays in (graph input order), a tuple out
    outs = model.run({"input_ids": ids})  # by name -> {output name: array}
    model.kernels                         # KernelInfo per kernel: name, nodes, workload key, tuned
    print(model.profile({"x": x}).table())  # every step timed in place (graph/profile.py)
    model.arena_bytes, model.lower_bound_bytes

Every kernel's arguments are bound once (pointers into the arena and the weights, checked by the
runtime when bound), so a call is: check and copy the inputs into the arena, one ctypes call per
kernel, return the outputs (the arena is reused by the next call). An output a kernel writes is
written straight into an array of its own each call (the pointers to it re-aimed before the
launches: `_FreshOutput`), in memory lent again once the caller drops the result; any other
output is copied out of the arena. Calls are serialised by a lock: one
arena per model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.errors import GraphError, ResourceError
from tilegraph.graph.dims import argument_dims, run_time_shape, solve_dims
from tilegraph.graph.index_checks import IndexCheck, index_checks
from tilegraph.graph.ir import Graph
from tilegraph.graph.plan import ALIGN, MemoryPlan
from tilegraph.runtime import threads
from tilegraph.runtime.host_memory import aligned_bytes, huge_page_bytes, in_huge_pages
from tilegraph.runtime.output_buffers import OutputBuffers
from tilegraph.target import Target


@dataclass(frozen=True)
class KernelInfo:
    name: str  # the kernel's entry point
    nodes: tuple[str, ...]  # graph nodes it computes
    workload_key: str
    tuned: bool  # built from a tuning record (else the default schedule)


@dataclass(frozen=True)
class Step:
    kernel: int  # index into CompiledModel.kernel_objects
    node: str
    inputs: tuple[str, ...]  # graph tensors bound to the kernel's inputs
    outputs: tuple[str, ...]
    nodes: tuple[str, ...] = ()  # graph nodes it computes (fused); () means just `node`

    @property
    def covers(self) -> tuple[str, ...]:
        return self.nodes or (self.node,)


@dataclass(frozen=True)
class _FreshOutput:
    """A graph output the kernels write into an array of its own each call, not into the arena: the
    bytes of the arena tensor holding it, and every argument bound to that tensor or to a view of it, as
    (launch, its step runner and position there or None, argument, byte offset into the tensor).
    GPT-2's 25.7 MB of logits were written into the arena, then copied out: one pass over them less."""

    nbytes: int
    name: str
    offset: int  # of the output in the tensor holding it
    arguments: tuple[tuple[Any, tuple[Any, int] | None, int, int], ...]


class CompiledModel:
    def __init__(self, graph: Graph, steps: Sequence[Step], kernel_objects: Sequence[Any], kernel_keys: Sequence[str],
                 tuned: Sequence[bool], plan: MemoryPlan, views: Mapping[str, str], target: Target,
                 rewrites: Sequence[str] = (), compile_seconds: float = 0.0):
        # weights in huge pages: a model whose weights exceed the caches streams them from memory
        # at every call, a TLB miss per 4 KB page otherwise (runtime/host_memory.huge_page_bytes)
        moved = in_huge_pages(graph.constants)
        self.graph = graph
        if any(moved[k] is not v for k, v in graph.constants.items()):
            self.graph = graph.replace(constants=moved)
            if "extents" in graph.__dict__:  # the run-time extents, derived once (where the bytes live changes none)
                self.graph.__dict__["extents"] = graph.__dict__["extents"]
        self.steps = tuple(steps)
        self.kernel_objects = tuple(kernel_objects)
        self.kernel_keys = tuple(kernel_keys)
        self.tuned = tuple(tuned)
        self.plan = plan
        self.views = dict(views)
        self.target = target
        self.rewrites = tuple(rewrites)
        self.compile_seconds = compile_seconds
        self.fallbacks: tuple[str, ...] = ()  # fused groups that failed to build and run unfused, with why
        self.orchestration: Any = None  # orchestration="blp": fusion.choose.OrchestrationReport
        self.tuning: Any = None  # compiled with a tuning budget: graph.tuning.TuningReport
        self.constructed: tuple[str, ...] = ()  # kernels built from Gensor's unmeasured picks (graph/construct.py)
        self.prepacked: tuple[str, ...] = ()  # constants packed once for kernels that packed them per call (prepack.py)
        self.precision = "fp32"  # "bf16": its products read bfloat16 (passes/gemms_read_bfloat16.py)
        self.precision_report: Any = None  # a low-precision compile's accuracy gate (graph/precision.py)
        _require_memory(plan.arena_bytes, graph.name)
        # every planned offset aligned in memory too; a large arena in huge pages, as the weights
        self._base = huge_page_bytes(plan.arena_bytes) if plan.arena_bytes else aligned_bytes(1, ALIGN)
        self._launches: list[Any] = []
        self._runners: list[tuple[Any, int]] | None = None  # the launches as native calls (_step_runners)
        self._one_by_one: list[tuple[Any, int]] = []  # (launch, its position): the launches as ctypes calls
        self._fresh: list[_FreshOutput] = []  # the outputs kernels write into arrays of their own (_fresh_outputs)
        self._buffers: dict[str, OutputBuffers] = {}  # their memory, lent again once the caller drops it
        self._bound_threads: int | None = None
        self._lock = threading.Lock()
        # the run-time dims (graph/dims.py): one int32 array per dims argument, filled every call
        # (at the uppers until a call: a launch is bound once, its values checked at every call by solve_dims)
        self._dims_arrays = {a: np.array([graph.dims[d][1] for d in argument_dims(a) or ()], np.int32)
                             for step in self.steps for a in step.inputs if argument_dims(a) is not None}
        self._input_views = {name: self.tensor_view(name) for name in graph.inputs}
        self._input_checks, self._step_checks = self._index_checks()

    # ---- public -------------------------------------------------------------------------------
    @property
    def input_names(self) -> tuple[str, ...]:
        return self.graph.inputs

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.graph.outputs

    @property
    def arena_bytes(self) -> int:
        return self.plan.arena_bytes

    @property
    def lower_bound_bytes(self) -> int:
        return self.plan.lower_bound_bytes

    @property
    def kernels(self) -> list[KernelInfo]:
        nodes: dict[int, list[str]] = {}
        for step in self.steps:
            nodes.setdefault(step.kernel, []).extend(step.covers)
        return [KernelInfo(k.entry, tuple(nodes.get(i, ())), key, tuned)
                for i, (k, key, tuned) in enumerate(zip(self.kernel_objects, self.kernel_keys, self.tuned))]

    def __call__(self, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
        if len(inputs) != len(self.graph.inputs):
            names = ", ".join(self.graph.inputs)
            raise GraphError(f"the model takes {len(self.graph.inputs)} inputs ({names}), got {len(inputs)}")
        results = self.run(dict(zip(self.graph.inputs, inputs)))
        return tuple(results[name] for name in self.graph.outputs)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._execute(inputs)

    def profile(self, inputs: Mapping[str, np.ndarray], seconds: float = 2.0) -> Any:
        """Every step timed inside the running model (graph/profile.py's ModelProfile): per kernel its
        time, share, GFLOP/s and % of peak, and the end-to-end time the steps do not explain."""
        from tilegraph.graph.profile import profile_model

        return profile_model(self, inputs, seconds=seconds)

    def _execute(self, inputs: Mapping[str, np.ndarray], step_ns: list[int] | None = None) -> dict[str, np.ndarray]:
        """One call; with `step_ns`, each launch's wall time (nanoseconds, in step order) is appended to it."""
        if not isinstance(inputs, Mapping):
            raise GraphError(f"run takes a dict of input name -> array, got a {type(inputs).__name__}; "
                             "call model(*arrays) to pass them in order")
        unknown = sorted(set(inputs) - set(self.graph.inputs))
        missing = [n for n in self.graph.inputs if n not in inputs]
        if unknown or missing:
            raise GraphError(f"the model takes inputs {list(self.graph.inputs)}; "
                             + (f"unknown {unknown}" if unknown else "") + (" and " if unknown and missing else "")
                             + (f"missing {missing}" if missing else ""))
        values = self._dims_values(inputs)
        arrays = {name: self._checked(name, inputs[name], values) for name in self.graph.inputs}
        clock = time.perf_counter_ns
        with self._lock:
            self._bind()
            for argument, array in self._dims_arrays.items():
                array[:] = [values[d] for d in argument_dims(argument) or ()]
            for name, array in arrays.items():
                if values:  # rows past the run-time extents keep what they held: no kernel reads them
                    np.copyto(self._input_views[name][_within(array.shape)], array)
                else:
                    np.copyto(self._input_views[name], array)
            fresh = {out.name: self._aim(out) for out in self._fresh}
            # a run of launches (one native call each, or one ctypes call each when timed or when
            # no runner serves), then the checks of the step that ends it
            runs = self._runners if step_ns is None and self._runners is not None else self._one_by_one
            for run, position in runs:
                if step_ns is None:
                    run.run()
                else:
                    began = clock()
                    run.run()
                    step_ns.append(clock() - began)
                for check in self._step_checks.get(position, ()):
                    check.check(self._valid(check.tensor, self.tensor_view(check.tensor), values), "tensor")
            return {name: self._valid(name, fresh[name], values) if name in fresh
                    else np.array(self._valid(name, self.tensor_view(name), values), copy=True)
                    for name in self.graph.outputs}

    @property
    def dims(self) -> dict[str, tuple[int, int]]:
        """The run-time dims' ranges {name: (lower, upper)} (graph/dims.py); {} for static shapes."""
        return dict(self.graph.dims)

    def _dims_values(self, inputs: Mapping[str, Any]) -> dict[str, int]:
        """The dims' values of a call, read from its inputs' shapes ({} without dims)."""
        if not self.graph.dims:
            return {}
        return solve_dims(self.graph, {n: np.shape(inputs[n]) for n in self.graph.inputs})

    def _valid(self, name: str, array: np.ndarray, values: Mapping[str, int]) -> np.ndarray:
        """`array` (tensor `name` at its largest shape) cut to its run-time extents: a view."""
        if not values or name not in self.graph.extents:
            return array
        return array[_within(run_time_shape(self.graph, name, values))]

    def summary(self) -> str:
        counts = self.graph.op_counts()
        tuned = sum(self.tuned)
        built = f"{tuned} tuned" + (f", {len(self.constructed)} constructed by Gensor" if self.constructed else "")
        if self.prepacked:
            built += f"; {len(self.prepacked)} weights prepacked"
        gate = f"\n{self.precision_report.line()}" if self.precision_report is not None else ""
        return (f"{self.graph.name}: {len(self.graph.nodes)} nodes ({', '.join(f'{k} {v}' for k, v in counts.items())}); "
                f"{len(self.steps)} kernel launches, {len(self.kernel_objects)} distinct kernels ({built}); "
                f"arena {self.arena_bytes / 1e6:.2f} MB (lower bound {self.lower_bound_bytes / 1e6:.2f} MB); "
                f"target {self.target.kind}/{self.target.isa}; {self.precision}{gate}")

    def save(self, path: Any) -> Any:
        from tilegraph.graph.serialize import save_model

        return save_model(self, path)

    # ---- internals -------------------------------------------------------------------------
    def tensor_view(self, name: str, shape: Sequence[int] | None = None) -> np.ndarray:
        """The array holding tensor `name` (a view into the arena or a constant), as `shape`; a
        dims argument's array (graph/dims.py)."""
        if name in self._dims_arrays:
            return self._dims_arrays[name]
        t = self.graph.type_of(name)
        shape = tuple(t.shape if shape is None else shape)
        if int(np.prod(shape, dtype=np.int64)) != t.size:
            raise GraphError(f"tensor {name!r} ({t}) viewed as {list(shape)}: the sizes differ")
        root = self._root(name)
        if root in self.graph.constants:  # (a view of a constant may read its bytes as another dtype)
            return self.graph.constants[root].view(np.dtype(t.dtype)).reshape(shape)
        offset = self.plan.offsets[name]
        return np.ndarray(shape, dtype=t.dtype, buffer=self._base, offset=offset)

    def _index_checks(self) -> tuple[dict[str, list[IndexCheck]], dict[int, list[IndexCheck]]]:
        """The gathers' index checks (graph/index_checks.py): constants now, graph inputs when a call
        passes them (`_checked`), others after the step that writes them."""
        by_input: dict[str, list[IndexCheck]] = {}
        by_step: dict[int, list[IndexCheck]] = {}
        writer = {self._root(o): i for i, step in enumerate(self.steps) for o in step.outputs}
        for check in index_checks(self.graph):
            root = self._root(check.tensor)
            if root in self.graph.constants:
                check.check(self.graph.constants[root], "constant")
            elif check.tensor in self.graph.inputs:
                by_input.setdefault(check.tensor, []).append(check)
            elif root in self.graph.inputs:  # a view of an input
                by_input.setdefault(root, []).append(IndexCheck(root, check.extent, check.node))
            elif root in writer:
                by_step.setdefault(writer[root], []).append(check)
        return by_input, by_step

    def _root(self, name: str) -> str:
        """The tensor whose storage `name` uses (views followed to their source)."""
        while name in self.views:
            name = self.views[name]
        return name

    def _checked(self, name: str, array: Any, values: Mapping[str, int] | None = None) -> np.ndarray:
        """The input as an array of the model's dtype and shape (`values` given: solve_dims has
        checked its shape against the dims' ranges); GraphError otherwise."""
        expected = self.graph.type_of(name)
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        if not values and array.shape != expected.shape:
            raise GraphError(f"input {name!r} has shape {array.shape}, the model takes {expected}")
        if str(array.dtype) != expected.dtype:
            raise GraphError(f"input {name!r} has dtype {array.dtype}, the model takes {expected} "
                             f"(tilegraph does not cast; use .astype({expected.dtype!r}))")
        for check in self._input_checks.get(name, ()):
            check.check(array, "input")
        return array

    def _bind(self) -> None:
        """Bind every kernel's arguments once (again only when the thread setting changes)."""
        wanted = threads.configured_num_threads() or self.target.num_cores
        if self._launches and wanted == self._bound_threads:
            return
        launches = []
        for step in self.steps:
            kernel = self.kernel_objects[step.kernel]
            ins = [self.tensor_view(n, kernel.inputs[i].shape) for i, n in enumerate(step.inputs)]
            outs = [self.tensor_view(n, kernel.outputs[i].shape) for i, n in enumerate(step.outputs)]
            launches.append(kernel.bind(ins, outs, num_threads=wanted))
        self._launches, self._bound_threads = launches, wanted
        self._runners = self._step_runners(launches)
        self._one_by_one = [(launch, position) for position, launch in enumerate(launches)]
        self._fresh = self._fresh_outputs(launches)
        self._buffers = {out.name: OutputBuffers(out.nbytes, ALIGN) for out in self._fresh}

    def _fresh_outputs(self, launches: list[Any]) -> list[_FreshOutput]:
        """The outputs the kernels can write straight into a new array (_FreshOutput): every
        launch a CPU one (its arguments a list of addresses), the output's tensor written by a
        step, no other output and no index check on the same tensor, not an input or a constant."""
        if not all(isinstance(getattr(launch, "arguments", None), list) for launch in launches):
            return []
        roots = [self._root(name) for name in self.graph.outputs]
        checked = {self._root(check.tensor) for checks in self._step_checks.values() for check in checks}
        fresh = []
        for name, root in zip(self.graph.outputs, roots):
            if roots.count(root) > 1 or root in checked or root in self.graph.inputs or root in self.graph.constants:
                continue
            arguments, written = [], False
            for position, (step, launch) in enumerate(zip(self.steps, launches)):
                for argument, tensor in enumerate((*step.inputs, *step.outputs)):
                    if self._root(tensor) == root:
                        offset = self.plan.offsets[tensor] - self.plan.offsets[root]
                        arguments.append((launch, self._runner_of(position), argument, offset))
                        written = written or argument >= len(step.inputs)
            if written:
                fresh.append(_FreshOutput(self.graph.type_of(root).nbytes, name,
                                          self.plan.offsets[name] - self.plan.offsets[root], tuple(arguments)))
        return fresh

    def _runner_of(self, position: int) -> tuple[Any, int] | None:
        """(the step runner running launch `position`, its position there), or None (one by one)."""
        first = 0
        for runner, last in self._runners or ():
            if first <= position <= last:
                return runner, position - first
            first = last + 1
        return None

    def _aim(self, out: _FreshOutput) -> np.ndarray:
        """An array for `out` in memory no earlier result still reaches (runtime/output_buffers.py),
        every argument bound to it pointed there (the launches' and the step runners' copies of
        them); returns the output's view of it."""
        t = self.graph.type_of(out.name)
        array = self._buffers[out.name].lend(t.shape, t.dtype, out.offset)
        base = array.ctypes.data - out.offset
        for launch, in_runner, argument, offset in out.arguments:
            launch.arguments[argument] = base + offset
            if in_runner is not None:
                in_runner[0].repoint(in_runner[1], argument, base + offset)
        return array

    def _step_runners(self, launches: list[Any]) -> list[tuple[Any, int]] | None:
        """[(runner, position of its last launch)]: the launches cut after every step with checks
        (runtime/step_runner.py), or None where a run of them cannot be one native call."""
        from tilegraph.runtime.step_runner import step_runner

        ends = sorted({p for p in self._step_checks if p < len(launches)} | {len(launches) - 1})
        runners, first = [], 0
        for last in ends:
            runner = step_runner(launches[first:last + 1])
            if runner is None:
                return None
            runners.append((runner, last))
            first = last + 1
        return runners


def _within(shape: Sequence[int]) -> tuple[slice, ...]:
    """The index of the leading `shape` block of a larger array."""
    return tuple(slice(0, n) for n in shape)


def _require_memory(nbytes: int, what: str) -> None:
    """ResourceError, before allocating, when `nbytes` exceed the memory this machine has available."""
    from tilegraph.testing.data import available_memory

    have = available_memory()
    if have is not None and nbytes > have:
        raise ResourceError(f"model {what!r} needs {nbytes / 2**30:.1f} GiB for its tensors; "
                            f"{have / 2**30:.1f} GiB is available")


__all__ = ["CompiledModel", "KernelInfo", "Step"]
