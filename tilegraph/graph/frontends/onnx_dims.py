"""The check that an ONNX graph read at its dims' upper bounds computes the same way at other values.

    g = check_dims_independent(graph, reread, source)   # reread(ranges) reads the model again

A frontend folds what it can: a Shape -> Gather -> Concat chain becomes a Reshape's target, a
Range over the sequence length a constant of positions, both at the values the graph was read at.
The graph is read once more with each dim one below its upper bound and compared node by node:

    same nodes, same attributes   -> nothing depends on the dim but the run-time extents: kept
    a reshape/expand `shape` entry one smaller      -> that entry is the dim (attr `shape_dims`;
                                                       one smaller for two dims: their sum, past + seq)
    a slice's `end` taking a whole axis at both     -> the same slice at every value
    a constant one shorter along an axis, a prefix  -> that axis is the dim (`input_dims`: positions 0..seq)
    anything else (a slice starting at a dim, a constant not a prefix, another attribute)
                                  -> GraphError naming the node: it would be wrong at other values

Before: reshape(x, shape=(1, 512, 12, 64)) read at seq = 512; at seq = 511 its shape is (1, 511, 12, 64).
After:  reshape(x, shape=(1, 512, 12, 64), shape_dims=("", "seq:1:512", "", "")).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Graph, Node

SHAPE_OPS = ("reshape", "expand")  # ops whose `shape` attribute may hold a dim (the target's extents)


def check_dims_independent(graph: Graph, reread: Callable[[dict[str, tuple[int, int]]], Graph], source: str) -> Graph:
    """`graph` (read at every dim's upper bound) with the dims found in its reshape targets and
    constants marked, after comparing it with a read at each dim one below its upper bound."""
    nodes = list(graph.nodes)
    input_dims = dict(graph.input_dims)
    for d, (lo, hi) in graph.dims.items():
        if lo == hi:
            continue  # a dim with one value: nothing can differ
        other = reread({**graph.dims, d: (lo, hi - 1)})
        tag = f"{d}:{lo}:{hi}"
        if len(other.nodes) != len(nodes) or any(a.op != b.op or a.inputs != b.inputs or a.outputs != b.outputs
                                                 for a, b in zip(nodes, other.nodes)):
            raise GraphError(f"{source}: the graph read at {d} = {hi - 1} has other nodes than at {d} = {hi} "
                             f"(its structure depends on {d}); compile it with fixed input_shapes")
        for i, (a, b) in enumerate(zip(graph.nodes, other.nodes)):
            if a.attrs != b.attrs and not _whole_axis_slice(a, b, graph, other):
                nodes[i] = _marked_shape(nodes[i], a, b, d, tag, source)
        for name, array in graph.constants.items():
            theirs = other.constants.get(name)
            if theirs is None:
                raise GraphError(f"{source}: constant {name!r} exists only at {d} = {hi}")
            axes = _prefix_axes(array, theirs)
            if axes is None:
                users = [n.name for n in graph.nodes if name in n.inputs]
                raise GraphError(f"{source}: constant {name!r} (read by {', '.join(users[:3]) or 'no node'}) holds "
                                 f"other values at {d} = {hi - 1} than at {d} = {hi}: it depends on {d} in a way "
                                 "tilegraph cannot compute at run time; compile with fixed input_shapes")
            if axes:
                known = list(input_dims.get(name, (None,) * array.ndim))
                for axis in axes:
                    known[axis] = d
                input_dims[name] = tuple(known)
    for node in nodes:  # each marked entry is its dims' sum at their upper bounds (not seq + 5)
        for k, mark in enumerate(node.attr("shape_dims") or ()):
            if mark and sum(int(term.split(":")[2]) for term in mark.split("+")) != node.attr("shape")[k]:
                raise GraphError(f"{source}: node {node.name!r} ({node.op}) target entry {k} is "
                                 f"{node.attr('shape')[k]} at the dims' upper bounds, not "
                                 f"{' + '.join(t.split(':')[0] for t in mark.split('+'))}; compile with fixed input_shapes")
    return graph.replace(nodes=tuple(nodes), input_dims=input_dims)


def _whole_axis_slice(a: Node, b: Node, graph: Graph, other: Graph) -> bool:
    """Whether slice `a` (read at the upper bound; `b` one below) differs from `b` only in `end`
    entries that take a whole axis at both reads, from 0 in steps of 1 (a Split of a projection's
    columns writes the row count as its end): the same slice at every value."""
    if a.op != "slice" or {k for k, _ in a.attrs} != {k for k, _ in b.attrs}:
        return False
    if any(v != w for (k, v), (_, w) in zip(a.attrs, b.attrs) if k != "end"):
        return False
    ours, theirs = graph.type_of(a.inputs[0]).shape, other.type_of(b.inputs[0]).shape
    begin, steps = a.attr("begin"), a.attr("steps")
    return all(x == y or (begin[k] == 0 and steps[k] == 1 and x >= ours[k] and y >= theirs[k])
               for k, (x, y) in enumerate(zip(a.attr("end"), b.attr("end"))))


def _marked_shape(marked: Node, a: Node, b: Node, d: str, tag: str, source: str) -> Node:
    """Node `a` (as `marked` so far, by other dims) with the entries of its `shape` attribute that
    are dim `d` marked (b: read at d - 1)."""
    differing = sorted({k for k, _ in a.attrs} ^ {k for k, _ in b.attrs}
                       | {k for (k, v), (_, w) in zip(a.attrs, b.attrs) if v != w})
    if a.op not in SHAPE_OPS or differing != ["shape"]:
        raise GraphError(f"{source}: node {a.name!r} ({a.op}) has attribute(s) {', '.join(differing)} that depend on "
                         f"dim {d}; only {' and '.join(SHAPE_OPS)} targets and whole-axis slices may follow a "
                         "run-time dim: compile with fixed input_shapes instead")
    ours, theirs = tuple(a.attr("shape")), tuple(b.attr("shape"))
    marks = list(marked.attr("shape_dims") or ("",) * len(ours))
    if len(ours) != len(theirs):
        raise GraphError(f"{source}: node {a.name!r} ({a.op}) has a target of another rank at other values of {d}")
    for k, (x, y) in enumerate(zip(ours, theirs)):
        if x == y:
            continue
        if x - y != 1:
            raise GraphError(f"{source}: node {a.name!r} ({a.op}) target entry {k} is {x} at the upper bound of {d} "
                             f"and {y} one below: not the dim itself; compile with fixed input_shapes")
        marks[k] = f"{marks[k]}+{tag}" if marks[k] else tag  # a sum of dims: past + seq
    return Node(a.op, a.inputs, a.outputs, {**a.attr_dict, "shape_dims": tuple(marks)}, a.name)


def _prefix_axes(ours: np.ndarray, theirs: np.ndarray) -> list[int] | None:
    """The axes along which `theirs` is `ours` one shorter and its prefix ([] if equal), else None."""
    if ours.shape == theirs.shape:
        return [] if np.array_equal(ours, theirs, equal_nan=True) else None
    if ours.ndim != theirs.ndim:
        return None
    axes = [k for k, (x, y) in enumerate(zip(ours.shape, theirs.shape)) if x != y]
    if any(ours.shape[k] - theirs.shape[k] != 1 for k in axes):
        return None
    crop = tuple(slice(0, s) for s in theirs.shape)
    return axes if np.array_equal(ours[crop], theirs, equal_nan=True) else None


__all__ = ["check_dims_independent", "SHAPE_OPS"]
