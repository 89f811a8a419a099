"""sink_transposes: transposes move below elementwise ops, pads and reductions, and cancel when
they meet their inverse; a transpose that keeps the memory order becomes a reshape (a view).

before:   a = transpose(x, P); r = relu(a); s = add(r, transpose(y, P)); t = transpose(s, P^-1)
after:    r = relu(x); s = add(r, y); t = s          (what remains of a, P's users, stays for them)

Rules, applied until none fires:
  transpose(transpose(x, p), q)        -> transpose(x, p[q]) (nothing when that is the identity)
  op(transpose(a, P), transpose(b, P) or constant c)   -> transpose(op(a, b or c transposed by P^-1), P)
                                       (op elementwise, identity included)
  pad(transpose(x, P), w)              -> transpose(pad(x, w permuted), P)
  reduce(transpose(x, P), axes)        -> reduce(x, P[axes]) (then a transpose if the kept axes reorder)
  transpose(x, P) moving only extent-1 axes  -> reshape(x)
"""

from __future__ import annotations

import numpy as np

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.ir import Graph, Node
from tilegraph.graph.ops.registry import op_def
from tilegraph.graph.passes.eliminate_dead_code import eliminate_dead_code

MAX_ROUNDS = 512  # a round moves each transpose past one join (a residual add); QDQ ResNet-50 needs 95


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


def _keeps_order(shape: tuple[int, ...], perm: tuple[int, ...]) -> bool:
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _one_round(graph: Graph, fired: list[str] | None) -> tuple[Graph, bool]:
    b = GraphBuilder.like(graph)
    rename: dict[str, str] = {}
    transposed: dict[str, tuple[str, tuple[int, ...]]] = {}  # new tensor -> (source, perm) of a transpose
    changed = False

    def note(rule: str, node: Node) -> None:
        nonlocal changed
        changed = True
        if fired is not None:
            fired.append(f"sink_transposes: {rule} at {node.name}")

    for node in graph.nodes:
        ins = [rename.get(i, i) for i in node.inputs]
        out = node.outputs[0] if node.outputs else ""
        if node.op == "transpose":
            perm = tuple(node.attr("perm"))
            source = ins[0]
            if source in transposed:  # transpose of a transpose: compose
                inner_source, inner = transposed[source]
                perm, source = tuple(inner[p] for p in perm), inner_source
                note("compose", node)
            shape = b.type_of(source).shape
            if perm == tuple(range(len(perm))):
                rename[out] = source
                continue
            if _keeps_order(shape, perm) and source not in b.constants:
                new_shape = tuple(shape[p] for p in perm)
                rename[out] = b.add("reshape", [source], {"shape": new_shape}, node.name)
                note("transpose as reshape", node)
                continue
            new = b.add("transpose", [source], {"perm": perm}, node.name)
            transposed[new] = (source, perm)
            rename[out] = new
            continue
        op = op_def(node.op)
        # an identity (a frontend's renaming of its result) passes a transpose on like any elementwise
        # op, unless it names a graph output (the output keeps its layout there)
        passes_on = op.elementwise and (not op.view or out not in graph.outputs)
        moved = _sink(b, node, ins, transposed) if passes_on or node.op in (
            "pad", "reduce_mean", "reduce_sum", "reduce_max", "reduce_min") else None
        if moved is not None:
            rename[out] = moved
            note(f"{node.op} above transpose", node)
            continue
        b.copy(node, graph, rename)
    return eliminate_dead_code(b.build_renamed(graph.outputs, rename)), changed


def _sink(b: GraphBuilder, node: Node, ins: list[str], transposed: dict) -> str | None:
    """The node applied before the transpose of its input(s), then that transpose; None if the
    rule does not apply."""
    perms = {transposed[i][1] for i in ins if i in transposed}
    if len(perms) != 1:
        return None
    perm = perms.pop()
    inverse = _inverse(perm)
    rank = len(perm)
    if node.op in ("pad", "reduce_mean", "reduce_sum", "reduce_max", "reduce_min"):
        source = transposed[ins[0]][0]
        attrs = node.attr_dict
        if node.op == "pad":
            attrs["before"] = tuple(attrs["before"][inverse[d]] for d in range(rank))
            attrs["after"] = tuple(attrs["after"][inverse[d]] for d in range(rank))
            y = b.add("pad", [source], attrs, f"{node.name}_moved")
            return b.add("transpose", [y], {"perm": perm}, f"{node.name}_t")
        axes = attrs.get("axes")
        axes = tuple(range(rank)) if not axes else tuple(a % rank for a in axes)
        attrs["axes"] = tuple(sorted(perm[a] for a in axes))
        y = b.add(node.op, [source], attrs, f"{node.name}_moved")
        if attrs.get("keepdims", 1):
            return b.add("transpose", [y], {"perm": perm}, f"{node.name}_t")
        kept = [perm[d] for d in range(rank) if d not in axes]  # source axes of the output, in output order
        order = tuple(int(i) for i in np.argsort(np.argsort(kept)))
        return y if order == tuple(range(len(kept))) else b.add("transpose", [y], {"perm": order}, f"{node.name}_t")
    new_inputs = []
    for i in ins:
        if i in transposed:
            new_inputs.append(transposed[i][0])
        elif i in b.constants:
            array = b.constants[i]
            if array.size == 1:
                new_inputs.append(i)
                continue
            if array.ndim > rank:
                return None
            full = array.reshape((1,) * (rank - array.ndim) + array.shape)
            new_inputs.append(b.constant(np.ascontiguousarray(full.transpose(inverse)), f"{i}_t"))
        else:
            return None
    y = b.add(node.op, new_inputs, node.attr_dict, f"{node.name}_moved")
    return b.add("transpose", [y], {"perm": perm}, f"{node.name}_t")


def sink_transposes(graph: Graph, fired: list[str] | None = None) -> Graph:
    for _ in range(MAX_ROUNDS):
        graph, changed = _one_round(graph, fired)
        if not changed:
            break
    return graph
