"""from_torch: a torch.nn.Module as a tilegraph Graph, through torch.export and the core ATen ops.

    g = from_torch(module, (x,))              # torch.export.export(...).run_decompositions()
    g = from_exported_program(ep)

Parameters, buffers and lifted constants become graph constants; user inputs become graph inputs
(named as the placeholders). A node whose tensor inputs are all constants is evaluated by torch
itself and becomes a constant (attention masks, position ids), so only the ops on run-time
tensors need a graph op: ATEN (torch_ops.py) maps them. Unknown ATen ops on run-time tensors raise
one UnsupportedOpError naming all of them before anything is compiled.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.errors import GraphError, UnsupportedOpError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.ir import Graph, TensorType

LIKE_OPS = {"full_like", "zeros_like", "ones_like", "empty_like"}  # depend on a shape only: constants
SKIPPED = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size", "_assert_async"}


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise GraphError("from_torch needs PyTorch: pip install 'tilegraph[models]' (torch==2.13.0, CPU)") from None
    return torch


def from_torch(module: Any, example_inputs: Sequence[Any], name: str | None = None) -> Graph:
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ep = torch.export.export(module, tuple(example_inputs))
        except Exception as e:  # export failures are many kinds; one line says which
            raise GraphError(f"torch.export could not capture {type(module).__name__}: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}") from None
        ep = ep.run_decompositions()
    return from_exported_program(ep, name or type(module).__name__)


def _short_name(target: Any) -> str:
    text = str(target)
    if text.startswith("aten."):
        return text.split(".")[1]
    return getattr(target, "__name__", text)


def from_exported_program(ep: Any, name: str = "model", constant_inputs: Sequence[int] = ()) -> Graph:
    """The Graph of an ExportedProgram of core ATen ops; user inputs at positions in
    `constant_inputs` are taken as constants (the torch.compile backend's frozen parameters)."""
    torch = _torch()
    from tilegraph.graph.frontends.torch_ops import ATEN, TorchEmitter

    gm = ep.graph_module
    state = {**ep.state_dict, **getattr(ep, "constants", {})}
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    _refuse_mutations(ep)
    e = TorchEmitter(name)
    names = e.constant_names
    env: dict[str, Any] = {}  # fx node name -> graph tensor name | torch.Tensor constant | tuple | python value
    user_position = 0
    user_args = [a for a in ep.example_inputs[0]] if getattr(ep, "example_inputs", None) else []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs.get(node.name)
        kind = spec.kind.name if spec is not None else "USER_INPUT"
        if kind == "USER_INPUT":
            value = node.meta.get("val")
            if user_position in constant_inputs and user_position < len(user_args):
                env[node.name] = user_args[user_position]  # a torch constant: made a graph constant where used
                names[id(user_args[user_position])] = node.name
            elif isinstance(value, torch.Tensor):
                dtype = str(value.dtype).replace("torch.", "")
                if any(not isinstance(s, int) for s in value.shape):
                    raise GraphError(f"input {node.name!r} has a dynamic shape {tuple(value.shape)}; tilegraph "
                                     "compiles static shapes")
                env[node.name] = e.input(node.name, TensorType(tuple(value.shape), dtype))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                env[node.name] = value  # a size argument export took as a constant (torch_dims.py)
            else:
                raise GraphError(f"input {node.name!r} is a {type(value).__name__}, not a tensor")
            user_position += 1
        else:
            target = spec.target
            if target not in state:
                raise GraphError(f"{kind.lower()} {target!r} has no value in the exported program")
            # Parameters, buffers and constants stay torch tensors: an op on them alone is computed
            # by torch itself (exactly its semantics); one a run-time op reads becomes a graph constant.
            env[node.name] = state[target]
            names[id(state[target])] = target.replace(".", "_")
    # refuse unsupported ops up front (constant-only subgraphs are evaluated by torch and need no mapping)
    runtime = _runtime_nodes(gm, env, set(e.inputs))
    unsupported: dict[str, list[str]] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.name in runtime:
            short = _short_name(node.target)
            if short not in ATEN and short not in LIKE_OPS and short not in SKIPPED and short != "getitem":
                unsupported.setdefault(f"aten.{short}", []).append(node.name)
    if unsupported:
        raise UnsupportedOpError(unsupported, None, f"torch module {name!r}")
    outputs: list[str] = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            env[node.name] = _convert(e, node, env, torch, ATEN)
        elif node.op == "output":
            for index, out in enumerate(node.args[0]):
                value = env[out.name] if hasattr(out, "name") else out
                outputs.append(_as_tensor(e, value, f"output_{index}"))
    return e.build(outputs).verify()


def _runtime_nodes(gm: Any, env: dict[str, Any], inputs: set[str]) -> set[str]:
    """Nodes that depend on a graph input's values (one forward pass; `*_like` ops read only a shape)."""
    runtime = {name for name, value in env.items() if isinstance(value, str) and value in inputs}
    for node in gm.graph.nodes:
        if node.op == "call_function" and _short_name(node.target) not in LIKE_OPS:
            if any(n.name in runtime for n in node.all_input_nodes):
                runtime.add(node.name)
    return runtime


def _as_tensor(e: Emitter, value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    from tilegraph.graph.frontends.torch_ops import numpy_of

    return e.constant(numpy_of(value) if not isinstance(value, np.ndarray) else value, name)


def _convert(e: Emitter, node: Any, env: dict[str, Any], torch: Any, aten: dict) -> Any:
    short = _short_name(node.target)
    if short in SKIPPED:
        return None

    def arg(a: Any) -> Any:
        if hasattr(a, "op") and hasattr(a, "name"):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        return a

    args = [arg(a) for a in node.args]
    kwargs = {k: arg(v) for k, v in node.kwargs.items()}
    if short == "getitem":
        return args[0][args[1]]
    if short in LIKE_OPS:  # only the input's (static) shape matters
        like = args[0]
        shape = e.type_of(like).shape if isinstance(like, str) else tuple(like.shape)
        dtype = kwargs.get("dtype") or (getattr(torch, e.type_of(like).dtype) if isinstance(like, str) else like.dtype)
        fill = 0 if short in ("zeros_like", "empty_like") else 1 if short == "ones_like" else args[1]
        return torch.full(shape, fill, dtype=dtype)

    def flat(values: Any) -> list[Any]:
        out = []
        for v in values:
            out.extend(flat(v) if isinstance(v, (list, tuple)) else [v])
        return out

    if not any(isinstance(v, str) for v in flat([*args, *kwargs.values()])):  # all constant: torch evaluates it
        with torch.no_grad():
            return node.target(*args, **kwargs)
    try:
        result = aten[short](e, node, args, kwargs)
    except GraphError as err:
        raise GraphError(f"node {node.name!r} (aten.{short}): {err}") from None
    except (ValueError, TypeError, IndexError) as err:
        raise GraphError(f"node {node.name!r} (aten.{short}) cannot be converted: {err}") from None
    _check_like_torch(e, node, result, short)
    return result


def _check_like_torch(e: Emitter, node: Any, result: Any, short: str) -> None:
    """The converted tensor has the dtype and shape PyTorch gives the node (its fake value): a
    conversion that would compute in another type is refused, never silently wrong."""
    expected = node.meta.get("val")
    got = result if isinstance(result, (tuple, list)) else (result,)
    want = expected if isinstance(expected, (tuple, list)) else (expected,)
    for g, w in zip(got, want):
        if not isinstance(g, str) or not hasattr(w, "dtype") or not hasattr(w, "shape"):
            continue
        t = e.type_of(g)
        dtype = str(w.dtype).replace("torch.", "")
        if dtype in ("float16", "bfloat16"):
            dtype = "float32"  # computed in float32 (the frontend widens 16-bit floats)
        shape = tuple(int(d) for d in w.shape)
        if t.dtype != dtype or t.shape != shape:
            raise GraphError(f"node {node.name!r} (aten.{short}) converts to {t}, PyTorch gives {dtype}{list(shape)}; "
                             "not supported")


def _refuse_mutations(ep: Any) -> None:
    """GraphError when the program writes its inputs or buffers in place: a compiled model is a
    pure function (the torch.compile backend then runs the subgraph in eager, with a warning)."""
    sig = ep.graph_signature
    buffers = dict(getattr(sig, "buffers_to_mutate", {}) or {})
    inputs = dict(getattr(sig, "user_inputs_to_mutate", {}) or {})
    if buffers or inputs:
        names = [*(f"buffer {b!r}" for b in buffers.values()), *(f"input {i!r}" for i in inputs.values())]
        raise GraphError(f"the module mutates {', '.join(names)} in place; tilegraph compiles functions without "
                         "side effects")


__all__ = ["from_torch", "from_exported_program"]
