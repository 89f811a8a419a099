"""compile_model: a graph (or an ONNX model, or a torch module) into a CompiledModel.

    model = compile_model(g, target="cpu", db=None, time_budget=0)
    model = compile_model("resnet50.onnx")                     # from_onnx first
    model = compile_model(module, example_inputs=(x,))         # from_torch first

Steps: the graph passes (passes.optimize), one kernel spec per non-view node, kernels built in
parallel (each from the database's best record, else the default schedule), the memory plan.
`time_budget` is the whole-model tuning budget; 0 (the only value until whole-model tuning
lands) builds without tuning.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from tilegraph.errors import GraphError
from tilegraph.graph.fusion.compose import fused_spec
from tilegraph.graph.fusion.partition import Group, partition
from tilegraph.graph.ir import Graph
from tilegraph.graph.kernels import build_kernels, kernel_spec
from tilegraph.graph.model import CompiledModel, Step
from tilegraph.graph.ops.registry import op_def
from tilegraph.graph.passes import optimize
from tilegraph.graph.plan import plan_memory
from tilegraph.target import as_target


def as_graph(model: Any, example_inputs: Any = None) -> Graph:
    """A Graph from a Graph, an ONNX path or ModelProto, or a torch.nn.Module (with example inputs)."""
    if isinstance(model, Graph):
        return model
    if isinstance(model, (str, os.PathLike)) or type(model).__name__ == "ModelProto":
        from tilegraph.graph.frontends.onnx import from_onnx

        return from_onnx(model)
    if hasattr(model, "forward") and hasattr(model, "parameters"):
        if example_inputs is None:
            raise GraphError("compiling a torch module needs example_inputs (a tuple of tensors)")
        from tilegraph.graph.frontends.torch import from_torch

        return from_torch(model, example_inputs)
    raise GraphError(f"cannot compile a {type(model).__name__}: pass a tilegraph Graph, an ONNX path or "
                     "ModelProto, or a torch.nn.Module with example_inputs")


def compile_model(model: Any, target: Any = "cpu", db: Any = None, time_budget: float = 0.0,
                  example_inputs: Any = None, optimize_graph: bool = True, workers: int | None = None,
                  progress: Callable[[int, int], None] | None = None, fuse: bool = True) -> CompiledModel:
    start = time.perf_counter()
    if time_budget is None or time_budget < 0:
        raise GraphError(f"time_budget must be >= 0 seconds, got {time_budget!r}")
    if time_budget > 0:
        raise GraphError("whole-model tuning is not available yet: compile with time_budget=0 (kernels come from "
                         "the database's records, else default schedules); tune operators with `tilegraph tune`")
    tgt = as_target(target)
    if tgt.kind != "cpu":
        raise GraphError(f"compiled models run on cpu targets for now, got {tgt.kind!r}")
    if isinstance(db, (str, os.PathLike)):
        from tilegraph.tune.database import open_database

        db = open_database(db, readonly=True)
    graph = as_graph(model, example_inputs)
    rewrites: list[str] = []
    if optimize_graph:
        graph, rewrites = optimize(graph)
    graph.verify()
    groups = partition(graph, fuse=fuse)
    specs = [_spec(graph, g) for g in groups]
    errors: dict[str, Any] = {}
    built = build_kernels(specs, tgt, db, workers, progress, errors=errors)
    fallbacks: list[str] = []
    if errors:  # a fused kernel whose invariant failed: its nodes run as separate kernels (Hidet's fallback)
        retry: list[Any] = []
        final: list[Any] = []
        for spec in specs:
            if spec.key not in errors:
                final.append(spec)
                continue
            fallbacks.append(f"{', '.join(spec.nodes)}: {errors[spec.key]}")
            parts = [kernel_spec(graph, n) for n in graph.nodes if n.name in spec.nodes and not op_def(n.op).view]
            retry += parts
            final += parts
        built.update(build_kernels(retry, tgt, db, workers, progress))
        specs = final
    covered = {n for spec in specs for n in spec.nodes}
    views = {node.outputs[0]: node.inputs[0] for node in graph.nodes
             if op_def(node.op).view and node.name not in covered}
    keys = list(dict.fromkeys(spec.key for spec in specs))
    index = {key: i for i, key in enumerate(keys)}
    steps = [Step(index[spec.key], spec.label, spec.arguments, spec.outputs, spec.nodes) for spec in specs]
    plan = plan_memory([(s.inputs, s.outputs) for s in steps], graph, views)
    model_ = CompiledModel(graph, steps, [built[k].kernel for k in keys], keys, [built[k].tuned for k in keys], plan,
                           views, tgt, rewrites, time.perf_counter() - start)
    model_.fallbacks = tuple(fallbacks)
    return model_


def _spec(graph: Graph, group: Group) -> Any:
    if not group.fused:
        return kernel_spec(graph, next(n for n in graph.nodes if n.name == group.nodes[0]))
    return fused_spec(graph, group)


__all__ = ["compile_model", "as_graph"]
