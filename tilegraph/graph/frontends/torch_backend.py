"""The torch.compile backend: `torch.compile(module, backend="tilegraph")`.

Registered with the `torch_dynamo_backends` entry point (pyproject.toml), so it works after
`pip install` without importing tilegraph first. Dynamo hands over each captured subgraph (graph
breaks give several); each is exported to core ATen, converted, compiled with time_budget=0 and
run on numpy views of the torch tensors. The subgraph's parameters and buffers are frozen into
the compiled model as constants (as inductor's freezing does: inference only).

A subgraph with symbolic sizes (`dynamic=True`, `torch._dynamo.mark_dynamic(x, 1, max=512)`)
compiles once for their ranges, each size a run-time dim (graph/dims.py; torch_dims.py).

A subgraph with ATen ops tilegraph has no graph op for is partitioned (as inductor falls back per
op): the runs of supported ops compile, each on its own, and the unsupported nodes between them run
in eager PyTorch, with one warning naming them. A subgraph we cannot take otherwise (a dynamic
shape, an in-place update of an input or a buffer, autograd: an input or parameter requiring grad
under grad mode, anything failing while compiling) runs in eager PyTorch instead, with one warning
naming why: a model PyTorch runs never fails because of us. Frozen parameters updated in place
after compiling (their version counters move) make the subgraph compile again with the new values,
with a warning. Results come back as torch tensors on the CPU.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from tilegraph.errors import GraphError, UnsupportedOpError

FROZEN_INPUT_MARKERS = ("_parameters_", "_buffers_")  # dynamo's names for lifted module state


def tilegraph_backend(gm: Any, example_inputs: list[Any], **options: Any) -> Any:
    try:
        return _compile(gm, example_inputs, options)
    except UnsupportedOpError as e:  # some ATen ops have no graph op: compile the rest around them
        ops = {op.split(".", 1)[-1] for op in e.unsupported}
        why = f"{', '.join(sorted(e.unsupported))} have no graph op"
        return _partitioned_or_eager(gm, example_inputs, options, ops, set(), why, e)
    except GraphError as e:  # one node's arguments are not supported (its op is): compile around it
        match = _FAILED_NODE.match(str(e))
        if match is None or options.get("_depth", 0) >= _MAX_DEPTH:
            return _eager(gm, e)
        why = f"node {match.group(1)} (aten.{match.group(2)}) cannot be converted"
        return _partitioned_or_eager(gm, example_inputs, options, set(), {match.group(1)}, why, e)
    except Exception as e:  # any failure: eager for this subgraph, never an error for the user
        return _eager(gm, e)


# a conversion failure names its node: "node 'index' (aten.index): ..." (frontends/torch.py)
_FAILED_NODE = re.compile(r"node '([^']+)' \(aten\.(\w+)\)")
_MAX_DEPTH = 8  # partitions of partitions: each level leaves out one more failing node


def _partitioned_or_eager(gm: Any, example_inputs: list[Any], options: dict[str, Any], ops: set[str],
                          nodes: set[str], why: str, error: Exception) -> Any:
    try:
        return _partitioned(gm, example_inputs, options, ops, nodes, why)
    except Exception:  # noqa: BLE001 (partitioning failed too: the whole subgraph in eager)
        return _eager(gm, error)


def _eager(gm: Any, e: Exception) -> Any:
    message = str(e).splitlines()[0] if str(e) else ""
    warnings.warn(f"tilegraph: running a subgraph of {len(gm.graph.nodes)} nodes in eager PyTorch: "
                  f"{type(e).__name__}: {message}", stacklevel=3)
    return gm.forward


def _compile(gm: Any, example_inputs: list[Any], options: dict[str, Any]) -> Any:
    import torch

    if any(isinstance(v, torch.SymInt) for v in example_inputs):  # torch.compile(dynamic=True), mark_dynamic
        from tilegraph.graph.frontends.torch_dims import compile_dynamic

        return compile_dynamic(gm, example_inputs, options)
    for value in example_inputs:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"a {type(value).__name__} input (symbolic shapes?) is not supported")
        if value.device.type != "cpu":
            raise TypeError(f"a tensor on {value.device} (tilegraph runs on the CPU)")
    if torch.is_grad_enabled() and any(v.requires_grad for v in example_inputs):
        raise GraphError("autograd: an input or parameter requires grad under grad mode, and tilegraph compiles "
                         "inference only (call the module under torch.no_grad() or torch.inference_mode())")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    frozen = [i for i, node in enumerate(placeholders)
              if isinstance(example_inputs[i], torch.nn.Parameter) or any(m in node.name for m in FROZEN_INPUT_MARKERS)]
    runtime = [i for i in range(len(example_inputs)) if i not in frozen]
    output_kind = _output_kind(gm)
    state = {"model": _build(gm, list(example_inputs), frozen, options), "versions": _versions(example_inputs, frozen)}

    def run(*args: Any) -> Any:
        versions = _versions(args, frozen)
        if versions != state["versions"]:  # a parameter was updated in place since it was frozen in
            warnings.warn("tilegraph: parameters or buffers changed after compiling; compiling this subgraph again "
                          "with their new values", stacklevel=2)
            state["model"], state["versions"] = _build(gm, list(args), frozen, options), versions
        arrays = [args[i].detach().contiguous().numpy() for i in runtime]
        outs = tuple(torch.from_numpy(o) for o in state["model"](*arrays))
        return list(outs) if output_kind is list else outs if output_kind is tuple else outs[0]

    return run


def _build(gm: Any, example_inputs: list[Any], frozen: list[int], options: dict[str, Any]) -> Any:
    import torch

    from tilegraph.graph.compile import compile_model
    from tilegraph.graph.frontends.torch import from_exported_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(gm, tuple(example_inputs), strict=False).run_decompositions()
    graph = from_exported_program(ep, "torch_compile", constant_inputs=frozen)
    return compile_model(graph, options.get("target", "cpu"), options.get("db"), 0.0)


def _versions(args: Any, frozen: list[int]) -> tuple[int, ...]:
    """The version counters of the frozen tensors (bumped by every in-place update)."""
    out = []
    for i in frozen:
        try:
            out.append(int(args[i]._version))
        except RuntimeError:  # an inference-mode tensor has no version counter (and cannot be updated in place)
            out.append(-1)
    return tuple(out)


def _output_kind(gm: Any) -> type:
    """list, tuple, or object (one tensor, not in a sequence) as the graph module returns."""
    for node in gm.graph.nodes:
        if node.op == "output":
            value = node.args[0]
            return list if isinstance(value, list) else tuple if isinstance(value, tuple) else object
    return tuple


def _partitioned(gm: Any, example_inputs: list[Any], options: dict[str, Any], unsupported: set[str],
                 failing: set[str], why: str) -> Any:
    """The subgraph in core ATen, its supported ops fused into partitions that compile each on its own
    (through tilegraph_backend: a partition that fails runs in eager, or is partitioned again), the
    ops in `unsupported` and the nodes in `failing` in eager PyTorch."""
    import torch
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    from tilegraph.graph.frontends.torch import LIKE_OPS, SKIPPED, _short_name
    from tilegraph.graph.frontends.torch_ops import ATEN

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aten_gm = torch.export.export(gm, tuple(example_inputs), strict=False).run_decompositions().module()
    class Supported(OperatorSupportBase):
        def is_node_supported(self, submodules: Any, node: Any) -> bool:
            if node.op != "call_function" or node.name in failing:
                return False
            short = _short_name(node.target)
            return short not in unsupported and (short in ATEN or short in LIKE_OPS or short == "getitem") and \
                short not in SKIPPED

    partitioner = CapabilityBasedPartitioner(aten_gm, Supported(), allows_single_node_partition=False)
    fused = partitioner.fuse_partitions(partitioner.propose_partitions())
    captured: dict[str, tuple] = {}

    class Capture(torch.fx.Interpreter):
        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            if str(target).startswith("fused_"):  # the partitions (export adds modules of its own)
                captured[target] = args
            return super().call_module(target, args, kwargs)

    with torch.no_grad():
        Capture(fused).run(*example_inputs)
    compiled = 0
    inner = {**options, "_depth": options.get("_depth", 0) + 1}
    for name, args in captured.items():
        submodule = getattr(fused, name)
        runner = tilegraph_backend(submodule, list(args), **inner)
        compiled += runner != submodule.forward
        delattr(fused, name)  # a plain callable in the submodule's place (fx calls it by attribute)
        setattr(fused, name, _Call(runner))
    eager = sum(1 for n in fused.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target))
    warnings.warn(f"tilegraph: {eager} node(s) of a subgraph run in eager PyTorch ({why}); {compiled} of "
                  f"{len(captured)} partition(s) around them compiled", stacklevel=3)
    return fused.forward


class _Call:
    """A callable standing in for a fused partition's submodule (fx calls it by attribute)."""

    def __init__(self, run: Any):
        self.run = run

    def __call__(self, *args: Any) -> Any:
        return self.run(*args)


__all__ = ["tilegraph_backend"]
