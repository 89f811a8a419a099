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
                  progress: Callable[[int, int], None] | None = None) -> CompiledModel:
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
    views: dict[str, str] = {}
    specs, node_steps = [], []
    for node in graph.nodes:
        if op_def(node.op).view:
            views[node.outputs[0]] = node.inputs[0]
            continue
        spec = kernel_spec(graph, node)
        specs.append(spec)
        node_steps.append((node, spec))
    built = build_kernels(specs, tgt, db, workers, progress)
    keys = list(built)
    index = {key: i for i, key in enumerate(keys)}
    steps = [Step(index[spec.key], node.name, spec.arguments, node.outputs) for node, spec in node_steps]
    plan = plan_memory([(s.inputs, s.outputs) for s in steps], graph, views)
    return CompiledModel(graph, steps, [built[k].kernel for k in keys], keys, [built[k].tuned for k in keys], plan,
                         views, tgt, rewrites, time.perf_counter() - start)


__all__ = ["compile_model", "as_graph"]
