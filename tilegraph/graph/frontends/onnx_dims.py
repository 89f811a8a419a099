"""The check that an ONNX graph read at its dims' upper bounds computes the same way at other values.

    g = check_dims_independent(read, reread, source)   # reread(ranges) reads the model again

A frontend folds what it can: a Shape -> Gather -> Concat chain becomes a Reshape's target, a
Range over the sequence length a constant of positions, both at the values the graph was read at.
The graph is read once more with each dim one below its upper bound and compared node by node:

    same nodes, same attributes   -> nothing depends on the dim but the run-time extents: kept
    a reshape/expand `shape` entry one smaller      -> that entry is the dim (attr `shape_dims`;
                                                       one smaller for two dims: their sum, past + seq)
    ... k smaller (k * the other dims' upper bounds) -> k times the dims' product (`4*batch`: a batch
                                                       of 4 heads; `batch*seq`: rows of a batch of
                                                       sequences; checked at both dims one below)
    a slice's `end` taking a whole axis at both     -> the same slice at every value
    a constant one shorter along an axis, a prefix  -> that axis is the dim (`input_dims`: positions
                                                       0..seq; an axis of past + seq for two dims)
    an integer constant of the same shape, every    -> its upper-bound value plus an offset_by_dims
    element one step (k) smaller                       node: positions past .. past + seq (checked
                                                       once more at the dim's lower bound)
    any other constant the reader folded from a node -> that node computed at run time, from its
                                                       inputs judged the same way (a causal mask
                                                       compares positions over past + seq with
                                                       positions past + i)
    anything else (a slice starting at a dim, another attribute, a weight that differs)
                                  -> GraphError naming the node: it would be wrong at other values

Before: reshape(x, shape=(1, 512, 12, 64)) read at seq = 512; at seq = 511 its shape is (1, 511, 12, 64).
After:  reshape(x, shape=(1, 512, 12, 64), shape_dims=("", "seq:1:512", "", "")).
Before: gather(wpe, constant [512 .. 1023]) folded to a constant, read at past = 512, seq = 512.
After:  gather(wpe, offset_by_dims(constant [512 .. 1023] over seq, terms=(("past:1:512", 1),))).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Graph, Node, TensorType

SHAPE_OPS = ("reshape", "expand")  # ops whose `shape` attribute may hold a dim (the target's extents)


@dataclass(frozen=True)
class Read:
    """A model read at some dims' values: its graph, and every constant the reader made (the
    graph's and the intermediate ones folded away), with the folded ones' nodes (`recipes`)."""

    graph: Graph
    constants: Mapping[str, np.ndarray]
    recipes: Mapping[str, Node]


def check_dims_independent(read: Read, reread: Callable[[dict[str, tuple[int, int]]], Read], source: str) -> Graph:
    """`read.graph` (read at every dim's upper bound) with the dims found in its reshape targets
    and constants marked, and the constants that follow a dim computed at run time, after comparing
    it with a read at each dim one below its upper bound."""
    graph = read.graph
    others: dict[str, Read] = {}
    for d, (lo, hi) in graph.dims.items():
        if lo == hi:
            continue  # a dim with one value: nothing can differ
        other = others[d] = reread({**graph.dims, d: (lo, hi - 1)})
        if len(other.graph.nodes) != len(graph.nodes) or any(
                a.op != b.op or a.inputs != b.inputs or a.outputs != b.outputs
                for a, b in zip(graph.nodes, other.graph.nodes)):
            raise GraphError(f"{source}: the graph read at {d} = {hi - 1} has other nodes than at {d} = {hi} "
                             f"(its structure depends on {d}); compile it with fixed input_shapes")
    joint_reads: dict[frozenset[str], Read] = {}

    def joint(ds: frozenset[str]) -> Read:
        """The model read with every dim of `ds` one below its upper bound together."""
        if ds not in joint_reads:
            joint_reads[ds] = reread({**graph.dims, **{d: (graph.dims[d][0], graph.dims[d][1] - 1) for d in ds}})
        return joint_reads[ds]

    nodes = [_marked(node, [(d, other.graph.nodes[i], graph.type_of, other.graph.type_of)
                            for d, other in others.items()], graph.dims,
                     lambda ds, i=i: joint(ds).graph.nodes[i], source)
             for i, node in enumerate(graph.nodes)]
    realized = _Realizer(read, others, reread, joint, source)
    for name in graph.constants:
        realized.tensor(name, [n.name for n in graph.nodes if name in n.inputs])
    # each marked entry is its dims' sum at their upper bounds plus what does not follow them
    # (past + 1 where a step's one token is static): the rest is written into the mark, "past:1:511+1"
    nodes = [_with_rest(node, source) for node in nodes]
    realized.nodes = [_with_rest(node, source) for node in realized.nodes]
    values = dict(graph.values)
    values.update((name, _type(array)) for name, array in realized.constants.items())
    values.update((o, _type(read.constants[o])) for n in realized.nodes for o in n.outputs if o in read.constants)
    input_dims = {k: v for k, v in graph.input_dims.items() if k in graph.inputs}
    return graph.replace(nodes=(*realized.nodes, *nodes), values=values, constants=realized.constants,
                         input_dims={**input_dims, **realized.input_dims})


class _Realizer:
    """Makes each constant the graph reads right at every value of the dims: kept, kept with dims
    on its axes, offset by the dims, or computed at run time by the node the reader folded."""

    def __init__(self, read: Read, others: Mapping[str, Read], reread: Callable[..., Read],
                 joint: Callable[[frozenset[str]], Read], source: str):
        self.read, self.others, self.reread, self.joint, self.source = read, others, reread, joint, source
        self.nodes: list[Node] = []
        self.constants: dict[str, np.ndarray] = {}
        self.input_dims: dict[str, tuple[str | None, ...]] = {}
        self.done: set[str] = set()
        self.node_names = {n.name for n in read.graph.nodes}
        self.at_lower: dict[str, Read] = {}  # the model read with one dim at its lower bound
        self.made: set[str] = set()  # tensor names this made up

    def tensor(self, name: str, readers: list[str]) -> None:
        if name in self.done:
            return
        self.done.add(name)
        ours = self.read.constants[name]
        dims = self.read.graph.dims
        prefix: dict[int, list[str]] = {}
        steps: dict[str, int] = {}
        for d, other in self.others.items():
            found = _judged(ours, other.constants.get(name))
            if found is None:
                break
            kind, value = found
            if kind == "prefix":
                for axis in value:
                    prefix.setdefault(axis, []).append(d)
            elif kind == "step":
                steps[d] = value
        else:
            # an axis over dims is their sum, plus what does not follow them (past + 1 where one
            # step's token is static)
            rest = {axis: ours.shape[axis] - sum(dims[d][1] for d in ds) for axis, ds in prefix.items()}
            if all(n >= 0 for n in rest.values()) and self._steps_hold(name, ours, steps):
                axes = tuple("+".join([*prefix[a], *([str(rest[a])] if rest[a] else [])]) if a in prefix else None
                             for a in range(ours.ndim))
                kept = name if not steps else self._fresh(f"{name}_at_upper")
                self.constants[kept] = ours
                if prefix:
                    self.input_dims[kept] = axes
                if steps:
                    terms = tuple((f"{d}:{dims[d][0]}:{dims[d][1]}", k) for d, k in steps.items())
                    self._add(Node("offset_by_dims", (kept,), (name,), {"terms": terms},
                                   self._fresh_node(f"{name}_offset")))
                return
        self._computed(name, readers)

    def _computed(self, name: str, readers: list[str]) -> None:
        """`name` computed at run time by the node the reader folded into it."""
        recipe = self.read.recipes.get(name)
        theirs = [(d, other.recipes.get(name)) for d, other in self.others.items()]
        if recipe is None or any(r is None or r.op != recipe.op or r.inputs != recipe.inputs
                                 or r.outputs != recipe.outputs for _, r in theirs):
            d = next((d for d, other in self.others.items()
                      if _judged(self.read.constants[name], other.constants.get(name)) is None), None)
            users = ', '.join(readers[:3]) or 'no node'
            if d is None:
                raise GraphError(f"{self.source}: constant {name!r} (read by {users}) follows the dims "
                                 f"({', '.join(self.others)}) in a way tilegraph cannot compute at run time (checked "
                                 "at their lower bounds too); compile with fixed input_shapes")
            hi = self.read.graph.dims[d][1]
            raise GraphError(f"{self.source}: constant {name!r} (read by {users}) holds "
                             f"other values at {d} = {hi - 1} than at {d} = {hi}: it depends on {d} in a way "
                             "tilegraph cannot compute at run time; compile with fixed input_shapes")
        for i in recipe.inputs:
            if i:
                self.tensor(i, [recipe.name])

        def type_in(constants: Mapping[str, np.ndarray]) -> Callable[[str], TensorType]:
            return lambda t: _type(constants[t])

        node = _marked(recipe, [(d, r, type_in(self.read.constants), type_in(self.others[d].constants))
                                for d, r in theirs], self.read.graph.dims,
                       lambda ds: self.joint(ds).recipes[name], self.source)
        # a node of several outputs (a split) computes them all; one kept as a constant already
        # is written to a name no node reads
        outs = tuple(o if o == name or o not in self.done else self._fresh(f"{o}_unread") for o in node.outputs)
        self.done.update(outs)
        self._add(Node(node.op, node.inputs, outs, node.attr_dict, self._fresh_node(f"{name}_run_time")))

    def _steps_hold(self, name: str, ours: np.ndarray, steps: Mapping[str, int]) -> bool:
        """Whether a constant one step smaller per unit of each dim in `steps` is that also at the
        dim's lower bound (a value is not judged linear from two points alone)."""
        for d, k in steps.items():
            lo, hi = self.read.graph.dims[d]
            if hi - lo < 2:
                continue
            if d not in self.at_lower:
                self.at_lower[d] = self.reread({**self.read.graph.dims, d: (lo, lo)})
            theirs = self.at_lower[d].constants.get(name)
            if theirs is None or theirs.shape != ours.shape or not np.array_equal(theirs, ours + k * (lo - hi)):
                return False
        return True

    def _add(self, node: Node) -> None:
        self.node_names.add(node.name)
        self.nodes.append(node)

    def _fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.read.constants or name in self.read.graph.values or name in self.made:
            n += 1
            name = f"{base}_{n}"
        self.made.add(name)
        return name

    def _fresh_node(self, base: str) -> str:
        name, n = base, 0
        while name in self.node_names:
            n += 1
            name = f"{base}_{n}"
        return name


def _with_rest(node: Node, source: str) -> Node:
    marks = node.attr("shape_dims")
    if not marks:
        return node
    completed = []
    for k, mark in enumerate(marks):
        rest = node.attr("shape")[k] - sum(_term_upper(term) for term in mark.split("+")) if mark else 0
        if rest < 0:
            raise GraphError(f"{source}: node {node.name!r} ({node.op}) target entry {k} is "
                             f"{node.attr('shape')[k]} at the dims' upper bounds, less than "
                             f"{' + '.join(_term_name(t) for t in mark.split('+'))}; compile with fixed input_shapes")
        completed.append(f"{mark}+{rest}" if rest else mark)
    return Node(node.op, node.inputs, node.outputs, {**node.attr_dict, "shape_dims": tuple(completed)}, node.name)


def _type(array: np.ndarray) -> TensorType:
    return TensorType(array.shape, str(array.dtype))


def _judged(ours: np.ndarray, theirs: np.ndarray | None) -> tuple[str, object] | None:
    """How `theirs` (read one below a dim's upper bound) follows `ours`: ("same", None), ("prefix",
    axes: one shorter along them, our leading block), ("step", k: integers of the same shape,
    each ours - k), or None."""
    if theirs is None:
        return None
    if ours.shape == theirs.shape and np.array_equal(ours, theirs, equal_nan=True):
        return "same", None
    if ours.shape == theirs.shape:
        if ours.dtype.kind not in "iu" or theirs.dtype != ours.dtype or ours.size == 0:
            return None
        delta = ours.astype(np.int64) - theirs.astype(np.int64)
        k = int(delta.flat[0])
        return ("step", k) if k != 0 and np.all(delta == k) else None
    axes = _prefix_axes(ours, theirs)
    return ("prefix", axes) if axes else None


def _marked(node: Node, reads: list[tuple[str, Node, Callable[[str], TensorType], Callable[[str], TensorType]]],
            dims: Mapping[str, tuple[int, int]], joint: Callable[[frozenset[str]], Node], source: str) -> Node:
    """`node` (read at the upper bounds) with the entries of its `shape` attribute that follow the
    dims marked, or a GraphError: `reads` holds, per dim, the same node read one below and both
    reads' types; `joint(ds)` is the same node read with all of `ds` one below together."""
    differing = [(d, other) for d, other, ours_type, their_type in reads
                 if node.attrs != other.attrs and not _whole_axis_slice(node, other, ours_type, their_type)]
    if not differing:
        return node
    for d, other in differing:
        _check_only_shape_differs(node, other, d, source)
    ours = tuple(node.attr("shape"))
    marks = []
    for k, x in enumerate(ours):
        steps = {d: x - other.attr("shape")[k] for d, other in differing if other.attr("shape")[k] != x}
        marks.append(_entry_mark(node, k, x, steps, dims, joint, source) if steps else "")
    return Node(node.op, node.inputs, node.outputs, {**node.attr_dict, "shape_dims": tuple(marks)}, node.name)


def _entry_mark(node: Node, k: int, x: int, steps: Mapping[str, int], dims: Mapping[str, tuple[int, int]],
                joint: Callable[[frozenset[str]], Node], source: str) -> str:
    """The mark of target entry `k` (`x` at the upper bounds, `steps[d]` smaller with d one below):
    a sum of dims (every step 1: `past + seq`), a multiple of one dim (step k: `4*batch`, a batch
    of 4 heads merged) or a multiple of a product of dims (step d = k * the others' upper bounds:
    `batch*seq`, rows of a batch of sequences merged). A product is checked against the read with
    all of its dims one below together (a sum of multiples fits the reads of one dim at a time too)."""
    tags = {d: f"{d}:{dims[d][0]}:{dims[d][1]}" for d in steps}
    if all(step == 1 for step in steps.values()):
        return "+".join(tags[d] for d in sorted(steps))
    uppers = {d: dims[d][1] for d in steps}
    factors = {d: step / math.prod(u for e, u in uppers.items() if e != d) for d, step in steps.items()}
    k_factor = next(iter(factors.values()))
    if k_factor >= 1 and k_factor == int(k_factor) and all(f == k_factor for f in factors.values()):
        k_factor = int(k_factor)
        rest = x - k_factor * math.prod(uppers.values())
        below = k_factor * math.prod(u - 1 for u in uppers.values()) + rest
        if len(steps) == 1 or (rest >= 0 and joint(frozenset(steps)).attr("shape")[k] == below):
            return "*".join([*([str(k_factor)] if k_factor != 1 else []), *(tags[d] for d in sorted(steps))])
    shown = ", ".join(f"{x - s} with {d} one below" for d, s in steps.items())
    raise GraphError(f"{source}: node {node.name!r} ({node.op}) target entry {k} is {x} at the dims' upper bounds "
                     f"and {shown}: not a sum of dims nor a multiple of their product; compile with fixed input_shapes")


def _term_upper(term: str) -> int:
    """A mark term's value at the upper bounds: `seq:1:512` 512, `4*batch:1:8` 32, `7` 7."""
    return math.prod(int(f.split(":")[2]) if ":" in f else int(f) for f in term.split("*"))


def _term_name(term: str) -> str:
    return "*".join(f.split(":")[0] for f in term.split("*"))


def _whole_axis_slice(a: Node, b: Node, ours_type: Callable[[str], TensorType],
                      their_type: Callable[[str], TensorType]) -> bool:
    """Whether slice `a` (read at the upper bound; `b` one below) differs from `b` only in `end`
    entries that take a whole axis at both reads, from 0 in steps of 1 (a Split of a projection's
    columns writes the row count as its end): the same slice at every value."""
    if a.op != "slice" or {k for k, _ in a.attrs} != {k for k, _ in b.attrs}:
        return False
    if any(v != w for (k, v), (_, w) in zip(a.attrs, b.attrs) if k != "end"):
        return False
    ours, theirs = ours_type(a.inputs[0]).shape, their_type(b.inputs[0]).shape
    begin, steps = a.attr("begin"), a.attr("steps")
    return all(x == y or (begin[k] == 0 and steps[k] == 1 and x >= ours[k] and y >= theirs[k])
               for k, (x, y) in enumerate(zip(a.attr("end"), b.attr("end"))))


def _check_only_shape_differs(a: Node, b: Node, d: str, source: str) -> None:
    """GraphError unless node `a` (read at the upper bound) and `b` (read at d - 1) differ only in
    a reshape or expand target of the same rank."""
    differing = sorted({k for k, _ in a.attrs} ^ {k for k, _ in b.attrs}
                       | {k for (k, v), (_, w) in zip(a.attrs, b.attrs) if v != w})
    if a.op not in SHAPE_OPS or differing != ["shape"]:
        raise GraphError(f"{source}: node {a.name!r} ({a.op}) has attribute(s) {', '.join(differing)} that depend on "
                         f"dim {d}; only {' and '.join(SHAPE_OPS)} targets and whole-axis slices may follow a "
                         "run-time dim: compile with fixed input_shapes instead")
    if len(a.attr("shape")) != len(b.attr("shape")):
        raise GraphError(f"{source}: node {a.name!r} ({a.op}) has a target of another rank at other values of {d}")


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


__all__ = ["check_dims_independent", "Read", "SHAPE_OPS"]
