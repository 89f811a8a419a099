"""Run-time dims of a whole graph: named symbolic extents, each with a range, bound at every call.

    g = from_onnx("bert.onnx", dims={"seq": (1, 512)})   # dim_param "seq" of input_ids
    g.dims                  # {"seq": (1, 512)}
    g.input_dims            # {"input_ids": (None, "seq")}
    g.extents["h1"]         # (1, seq, 768): te extents of a tensor whose extent varies
    solve_dims(g, {"input_ids": (1, 100)})   # {"seq": 100}

Shapes stay static: every tensor's shape is its largest one (each dim at its upper bound), which
is how it is stored, so passes, fusion and the memory plan work on them as on any graph. What
varies is computed, not declared: `propagate_extents` lowers each node to te on placeholders with
the input extents, and the te ops (ops/_common.DIMS_OPS) compute the output extents, or refuse an
op they cannot run on a run-time extent with one line naming the node. One implementation of
shape inference with symbols: the one the kernels are built from.

A kernel whose computation mentions dims takes them as one more argument, last: the int32 array
`dims_argument(workload)` names (the values in the order of `Workload.dims`); the compiled model
fills it before the launches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilegraph import te
from tilegraph.errors import GraphError
from tilegraph.te.dims import Dim, canonical, value_of
from tilegraph.te.expr import Expr

DIMS_ARGUMENT = "tg_dims:"  # prefix of the pseudo-tensor holding a kernel's dims values


def dims_argument(dims: Sequence[Dim]) -> str:
    """The step argument of a kernel's dims input: `tg_dims:past,seq` (names in its order)."""
    return DIMS_ARGUMENT + ",".join(d.name for d in dims)


def argument_dims(argument: str) -> tuple[str, ...] | None:
    """The dim names a dims argument holds, or None for a graph tensor."""
    if not argument.startswith(DIMS_ARGUMENT):
        return None
    return tuple(argument[len(DIMS_ARGUMENT):].split(","))


def te_dims(graph: Any) -> dict[str, Dim]:
    """The graph's dims as te Dims (equal Dims for equal names and ranges: kernels share them)."""
    return {name: te.dim(name, hi, lo) for name, (lo, hi) in graph.dims.items()}


def check_dims(dims: Mapping[str, Any], where: str) -> dict[str, tuple[int, int]]:
    """`dims` ({name: (lower, upper)} or {name: upper}) checked: GraphError naming the bad one."""
    checked: dict[str, tuple[int, int]] = {}
    for name, bounds in dims.items():
        lo, hi = (1, bounds) if isinstance(bounds, int) else tuple(bounds) if isinstance(bounds, (tuple, list)) \
            else (None, None)
        if (not isinstance(name, str) or not name.isidentifier() or isinstance(lo, bool) or isinstance(hi, bool)
                or not isinstance(lo, int) or not isinstance(hi, int) or not 1 <= lo <= hi or hi > 2**31 - 1):
            raise GraphError(f"{where}: dims[{name!r}] = {bounds!r}: a dim is an identifier with a range "
                             "(lower, upper), 1 <= lower <= upper")
        checked[name] = (lo, hi)
    return checked


def check_input_dims(graph: Any) -> None:
    """GraphError unless every input's (or constant's) dims are known dims at their upper bound in
    its shape, and every dim is some input's extent (else no call could say its value). A constant
    with a dim holds its values at the upper bound, the first `value` of them along that axis
    being its values at `value` (positions 0..seq: frontends/onnx_dims.py)."""
    used: set[str] = set()
    for name, axes in graph.input_dims.items():
        if name not in graph.inputs and name not in graph.constants:
            raise GraphError(f"input_dims names {name!r}, which is not a graph input or constant")
        shape = graph.type_of(name).shape
        if len(axes) != len(shape):
            raise GraphError(f"input {name!r} has rank {len(shape)}, its dims {axes} have {len(axes)} entries")
        for axis, (d, extent) in enumerate(zip(axes, shape)):
            if d is None:
                continue
            # a constant's axis may be a sum of dims and a number (positions over past + seq, past + 1)
            terms = d.split("+")
            if len(terms) > 1 and name in graph.inputs:
                raise GraphError(f"input {name!r} axis {axis} is {d!r}: an input's axis is one dim")
            unknown = [t for t in terms if t not in graph.dims and not t.isdigit()]
            if unknown or all(t.isdigit() for t in terms):
                raise GraphError(f"input {name!r} axis {axis} is dim {(unknown or terms)[0]!r}, which has no range "
                                 "in the graph's dims")
            upper = sum(int(t) if t.isdigit() else graph.dims[t][1] for t in terms)
            if extent != upper:
                raise GraphError(f"input {name!r} axis {axis} is dim {d!r}: its shape must hold the upper bound "
                                 f"{upper}, it holds {extent}")
            if name in graph.inputs:
                used.add(d)
    unused = sorted(set(graph.dims) - used)
    if unused:
        raise GraphError(f"dim(s) {', '.join(unused)} are not an extent of any graph input; "
                         "every dim must be readable from the inputs of a call")


def propagate_extents(graph: Any) -> dict[str, tuple[Any, ...]]:
    """Per tensor with a run-time extent, its te extents: the inputs' from `input_dims`, every
    other computed by lowering its node to te (so what the kernels compute, and nothing else).
    GraphError naming the node that cannot take a run-time extent, or whose te storage is not
    its graph shape."""
    from tilegraph.graph.kernels import lower_node  # the lowering sits above this table
    from tilegraph.graph.ops.registry import te_shape

    dims = te_dims(graph)
    extents: dict[str, tuple[Any, ...]] = {}
    for name, axes in graph.input_dims.items():
        if any(a is not None for a in axes):
            extents[name] = tuple(s if a is None else _dims_sum(dims, a) for s, a in zip(graph.type_of(name).shape, axes))
    for node in graph.nodes:
        if not any(i in extents for i in node.inputs if i):
            continue
        env: dict[str, Any] = {}
        outs = lower_node(graph, node, env, prefix="p", extents=extents)
        for out, name in zip(outs, node.outputs):
            if not isinstance(out, te.Tensor):
                raise GraphError(f"node {node.name!r} ({node.op}) does not lower to a tensor on run-time dims")
            if tuple(out.shape) != te_shape(graph.type_of(name).shape):
                raise GraphError(f"node {node.name!r} ({node.op}) on run-time dims stores {list(out.shape)}, "
                                 f"its graph type is {graph.type_of(name)} (the largest shape)")
            if out.bounds and len(out.extents) == len(graph.type_of(name).shape):
                extents[name] = tuple(out.extents)
    return extents


def _dims_sum(dims: Mapping[str, Dim], axis: str) -> Any:
    """The te extent of an axis named `seq`, `past+seq` or `past+1`."""
    total: Any = None
    for name in axis.split("+"):
        term = int(name) if name.isdigit() else dims[name]
        total = term if total is None else total + term
    return canonical(total)


def solve_dims(graph: Any, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The dims' values from the shapes of a call's inputs; GraphError (one line) for a shape that
    does not fit: a static extent that differs, a dim outside its range, two inputs disagreeing."""
    values: dict[str, int] = {}
    for name in graph.inputs:
        shape = tuple(shapes[name])
        expected = graph.type_of(name)
        axes = graph.input_dims.get(name, (None,) * len(expected.shape))
        if len(shape) != len(expected.shape):
            raise GraphError(f"input {name!r} has shape {shape}, the model takes rank {len(expected.shape)} "
                             f"({_shown(graph, name)})")
        for axis, (d, got, largest) in enumerate(zip(axes, shape, expected.shape)):
            if d is None:
                if got != largest:
                    raise GraphError(f"input {name!r} has shape {shape}, the model takes {_shown(graph, name)}")
                continue
            lo, hi = graph.dims[d]
            if not lo <= got <= hi:
                raise GraphError(f"input {name!r} axis {axis} is dim {d} = {got}, outside its range [{lo}, {hi}]")
            if values.setdefault(d, got) != got:
                raise GraphError(f"dim {d} is {values[d]} in one input and {got} in {name!r} axis {axis}")
    return values


def run_time_shape(graph: Any, name: str, values: Mapping[str, int]) -> tuple[int, ...]:
    """Tensor `name`'s shape at the dims' `values` (its graph shape where nothing varies)."""
    extents = graph.extents.get(name)
    if extents is None:
        return graph.type_of(name).shape
    return tuple(e if isinstance(e, int) else value_of(e, values) for e in extents)


def least_shape(graph: Any, name: str) -> tuple[int, ...]:
    """Tensor `name`'s shape at every dim's lower bound: the least work a kernel over it may be
    given (a graph decision that pays only with enough work, winograd's tiles, counts on that)."""
    if not graph.dims:
        return graph.type_of(name).shape
    return run_time_shape(graph, name, {d: lo for d, (lo, _) in graph.dims.items()})


def _shown(graph: Any, name: str) -> str:
    t = graph.type_of(name)
    axes = graph.input_dims.get(name, (None,) * len(t.shape))
    return f"{t.dtype}[{', '.join(str(s) if a is None else a for s, a in zip(t.shape, axes))}]"


def run_time_target(node: Any, x: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """The target extents of a reshape or expand node on te tensor `x`: its static `shape` (read at
    the dims' upper bounds), with each entry the frontend marked a dim (attr `shape_dims`, entries
    "name:lower:upper", sums and products of them: `batch:1:8*seq:1:512`) as that te extent, and,
    where none is marked, each of x's run-time extents placed at the entry that starts at the same
    element offset with the same largest extent (a reshape keeping it a whole axis). Static where
    x has no dims and nothing is marked."""
    out: list[Any] = list(shape)
    marks = node.attr("shape_dims")
    if marks:
        for k, tag in enumerate(marks):
            if tag:  # "seq:1:512", a sum "past:1:512+seq:1:512", "past:1:511+1", products "4*batch:1:8"
                value: Any = None
                for term in tag.split("+"):
                    product: Any = None
                    for factor in term.split("*"):
                        name, *bounds = factor.split(":")
                        f = te.dim(name, int(bounds[1]), int(bounds[0])) if bounds else int(name)
                        product = f if product is None else product * f
                    value = product if value is None else value + product
                out[k] = canonical(value)
        return tuple(out)
    if not getattr(x, "bounds", None) or node.op != "reshape":
        return tuple(out)
    offsets, before = {}, 1
    for extent, storage in zip(x.extents, x.shape):
        if isinstance(extent, Expr):
            offsets[before] = (extent, storage)
        before *= storage
    before = 1
    for k, s in enumerate(shape):
        found = offsets.get(before)
        if found is not None and found[1] == s and s != 1:
            out[k] = found[0]
            del offsets[before]
        before *= s
    return tuple(out)


def with_dims_of(graph: Any, source: Any) -> Any:
    """`graph` (made by passes from `source`) with `source`'s dims, and the dims of its inputs and
    of its constants still there unchanged (a constant a pass remade is static, and a node adding
    it to a run-time extent then refuses to lower, naming itself)."""
    if not source.dims:
        return graph
    kept = {name: axes for name, axes in source.input_dims.items()
            if name in graph.inputs or (name in graph.constants and name in source.constants
                                        and _same_array(graph.constants[name], source.constants[name]))}
    return graph.replace(dims=dict(source.dims), input_dims=kept)


def _same_array(a: Any, b: Any) -> bool:
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b)))


__all__ = ["DIMS_ARGUMENT", "dims_argument", "argument_dims", "te_dims", "check_dims", "check_input_dims",
           "propagate_extents", "solve_dims", "run_time_shape", "least_shape", "run_time_target", "with_dims_of"]
