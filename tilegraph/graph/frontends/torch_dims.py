"""torch.compile with symbolic sizes: one compiled model for the sizes' ranges (graph/dims.py).

    x = torch.randn(1, 37, 768)
    torch._dynamo.mark_dynamic(x, 1, min=1, max=512)      # or torch.compile(..., dynamic=True) and a bound
    compiled = torch.compile(module, backend="tilegraph", dynamic=True)
    compiled(x); compiled(x[:, :5])                        # one compile for both

Dynamo hands the backend a graph whose sizes are symbols (SymInt placeholders, tensors of symbolic
shape), each with a range in its shape environment. Every symbol that is a whole axis of an input
becomes a run-time dim named after it; the graph is exported and converted at every dim's upper
bound and checked against a conversion one below (frontends/onnx_dims.check_dims_independent, the
ONNX frontend's check), then compiled once. A symbol without a finite upper bound, or an input
axis that is an expression of symbols (2 * s0), is refused: the caller's subgraph runs in eager
PyTorch with one warning (torch_backend.py), never a model that is wrong at other sizes.
"""

from __future__ import annotations

import warnings
from typing import Any

from tilegraph.errors import GraphError

MAX_UPPER = 1 << 16  # a symbol's bound above this is no bound (dynamo's default range is [2, inf])


def compile_dynamic(gm: Any, example_inputs: list[Any], options: dict[str, Any]) -> Any:
    """The backend's callable for a subgraph with symbolic sizes: one compiled model for their ranges."""
    import torch

    from tilegraph.graph.compile import compile_model
    from tilegraph.graph.frontends.onnx_dims import Read, check_dims_independent
    from tilegraph.graph.frontends.torch_backend import FROZEN_INPUT_MARKERS, _eager, _output_kind, _versions

    ranges = _symbol_ranges()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ints = [i for i, v in enumerate(example_inputs) if isinstance(v, torch.SymInt)]
    frozen = [i for i, node in enumerate(placeholders)
              if isinstance(example_inputs[i], torch.nn.Parameter) or any(m in node.name for m in FROZEN_INPUT_MARKERS)]
    tensors = [i for i in range(len(example_inputs)) if i not in ints]
    axes: dict[int, tuple[str | None, ...]] = {}  # input position -> the symbol of each axis
    used: dict[str, tuple[int, int]] = {}
    for i in tensors:
        value = placeholders[i].meta.get("example_value", example_inputs[i])
        names: list[str | None] = []
        for extent in value.shape:
            if isinstance(extent, int):
                names.append(None)
                continue
            expr = extent.node.expr
            if getattr(expr, "is_number", False):  # a size dynamo specialised (dynamic=True marks every axis)
                names.append(None)
                continue
            symbol = str(expr)
            if symbol not in ranges:
                raise GraphError(f"input axis size {symbol} is an expression of symbolic sizes; tilegraph takes "
                                 "a symbolic size only as a whole axis")
            lo, hi = ranges[symbol]
            if hi is None or hi > MAX_UPPER:
                raise GraphError(f"symbolic size {symbol} has no upper bound; give one with "
                                 f"torch._dynamo.mark_dynamic(x, axis, max=N)")
            used[symbol] = (max(1, lo), hi)
            names.append(symbol)
        axes[i] = tuple(names)
    if not used:
        raise GraphError("no input axis is a symbolic size")
    symbols = {str(example_inputs[i].node.expr): i for i in ints}

    def convert(values: dict[str, tuple[int, int]]) -> Any:
        """The subgraph exported and converted with every symbol at its range's upper bound."""
        from tilegraph.graph.frontends.torch import from_exported_program

        fixed = {i: values[s][1] if s in values else int(example_inputs[i]) for s, i in symbols.items()}
        args: list[Any] = []
        for i, value in enumerate(example_inputs):
            if i in fixed:  # a size argument: an int, which export takes as a constant
                args.append(fixed[i])
            elif i in frozen:
                args.append(value)
            else:
                shape = [values[n][1] if n else int(e) for n, e in zip(axes[i], value.shape)]
                args.append(torch.zeros(shape, dtype=value.dtype))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(gm, tuple(args), strict=False).run_decompositions()
        return from_exported_program(ep, "torch_compile", constant_inputs=frozen)

    runtime = [i for i in tensors if i not in frozen]

    def build() -> Any:
        graph = convert(used)
        input_dims = {name: axes[i] for name, i in zip(graph.inputs, runtime) if any(axes[i])}
        graph = graph.replace(dims=used, input_dims=input_dims).verify()
        graph = check_dims_independent(Read(graph, graph.constants, {}),
                                       lambda r: Read(g := convert(r), g.constants, {}), "torch.compile subgraph")
        return compile_model(graph, options.get("target", "cpu"), options.get("db"), 0.0)

    output_kind = _output_kind(gm)
    state: dict[str, Any] = {}

    def run(*args: Any) -> Any:
        # compiled at the first call, outside dynamo's tracing (export inside it cannot decompose a
        # graph of symbolic sizes); a failure then runs the subgraph eagerly, with one warning
        versions = _versions(args, frozen)
        if "model" in state and state["model"] is not None and versions != state["versions"]:
            warnings.warn("tilegraph: parameters or buffers changed after compiling; compiling this subgraph again "
                          "with their new values", stacklevel=2)  # as the static path does (torch_backend.py)
            del state["model"]
        if "model" not in state:
            state["versions"] = versions
            try:
                state["model"] = build()
            except Exception as err:  # noqa: BLE001 (a model PyTorch runs never fails because of us)
                state["model"] = None
                _eager(gm, err)
        if state["model"] is None:
            return gm.forward(*args)
        arrays = [args[i].detach().contiguous().numpy() for i in runtime]
        outs = tuple(torch.from_numpy(o) for o in state["model"](*arrays))
        return list(outs) if output_kind is list else outs if output_kind is tuple else outs[0]

    run.tilegraph_state = state  # the compiled model once built (tests look)
    return run


def _finite(bound: Any) -> int | None:
    """A sympy bound as an int, None where infinite."""
    if getattr(bound, "is_finite", True) is False:
        return None
    try:
        return int(bound)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def _symbol_ranges() -> dict[str, tuple[int, int | None]]:
    """Each symbol of the shape environment dynamo traced in: (lower, upper or None)."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    env = getattr(getattr(context, "fake_mode", None), "shape_env", None)
    if env is None:
        raise GraphError("symbolic sizes without dynamo's shape environment")
    out: dict[str, tuple[int, int | None]] = {}
    for symbol, bounds in env.var_to_range.items():
        lower, upper = (_finite(b) for b in (bounds.lower, bounds.upper))
        out[str(symbol)] = (lower if lower is not None else 1, upper)
    return out


__all__ = ["compile_dynamic"]


