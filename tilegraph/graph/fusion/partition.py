"""partition: a graph's nodes grouped into kernels around anchors (Hidet's post-scheduling fusion).

    groups = partition(graph)       # [Group(nodes, anchor, output, inputs, epilogue_path), ...]

An *anchor* is a node that is not injective (conv2d, matmul, softmax, layer_norm, pools,
reductions): it is scheduled (tuned) alone, under its own workload key. Its group adds

- an **epilogue**: consumers of the anchor's output, taken in topological order, while each is
  elementwise (an `add` of a bias or a residual, relu, gelu, clip, a scale, where/isnan...) over a
  group tensor of its own shape, or a layout op (transpose, reshape) of one group tensor. Then
  every step maps an index of the anchor's output to one index of the next tensor (identity,
  a permutation, a re-linearisation, leading 1s): the map is invertible, so the fused kernel
  computes each value once, at the anchor's store. An operand from outside the group may have any
  broadcastable shape (a bias), but must not depend on the group (no cycle through another kernel).
  The group then keeps the largest prefix of absorbed nodes that leaves exactly one tensor needed
  outside it (the group's output); a trailing view stays a view.
- a **prologue**: injective producers of the anchor's inputs (transpose, reshape, slice, pad,
  broadcast, cast, elementwise arithmetic, gather), taken upwards while every consumer of the
  tensor they produce is in the group and it is not a graph output. A gather's indices are never
  taken: they reach memory, where the model checks them (graph/index_checks.py). Into a
  contraction (conv2d, matmul), which reads each input many times, only producers without
  transcendental math (exp, erf, tanh, sqrt, ...) are taken: those would be recomputed at every
  read. A group holds at most MAX_FUSED_NODES nodes.
- the **operands' prologues**: the same for an operand of an elementwise epilogue node that has as
  many elements as the node's output (each element read once, so nothing is recomputed), e.g. a
  QDQ model's residual, dequantized from the uint8 tensor another kernel wrote:

      r8 = <previous group>                 group(anchor=conv2d, nodes=[conv2d, .., cast, sub, mul, add, ..])
      s = mul(sub(cast(r8), zero), scale)   one kernel reads r8's bytes, where a kernel of its own
      a = add(dequantize(conv(x, w)), s)    wrote s (four times the bytes) for the add to read

Injective nodes left over become one kernel per chain: the chain's last node and its injective
producers (each consumed only inside the chain), with no anchor; the default schedule inlines the
cheap stages. View nodes outside every group move no data and stay views.

Before (ResNet bottleneck tail):        After:
    c = conv2d(x, w, b)                     group(anchor=conv2d, nodes=[conv2d, add, relu], output=r)
    a = add(c, shortcut)                    one kernel: r = relu(conv(x, w, b) + shortcut), stored once
    r = relu(a)
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegraph.graph.index_checks import indices_operand
from tilegraph.graph.ir import Graph, Node
from tilegraph.graph.ops.registry import op_def

LAYOUT_INVERTIBLE = frozenset({"transpose", "reshape", "identity"})
INJECTIVE_LAYOUT = LAYOUT_INVERTIBLE | {"slice", "expand", "pad", "gather", "concat", "gather_elements", "reshape_copy"}
CONTRACTIONS = frozenset({"conv2d", "matmul"})
# Nodes one group may hold: a group is one te expression, and a chain of hundreds of injective
# nodes would make an expression (and the analyses walking it) hundreds of levels deep.
MAX_FUSED_NODES = 32
# Reads of absorbed producers the composed expression may hold: a tensor read twice inside a group
# is inlined twice, so a chain where each node reads its predecessor twice (x * sigmoid(x), a
# recurrence unrolled) doubles the expression per node; past this many the tensor stays in memory.
MAX_INLINED_READS = 64
# Producers a contraction's prologue may take: it recomputes them at every read (K times per output),
# and long select chains (concat of slices, as an unrolled recurrence makes) make lowering slow.
MAX_CONTRACTION_PROLOGUE = 8
TRANSCENDENTAL = frozenset({"exp", "log", "erf", "sqrt", "tanh", "sigmoid", "gelu", "pow", "hard_swish",
                            "hard_sigmoid"})


@dataclass(frozen=True)
class Group:
    nodes: tuple[str, ...]  # topological order
    anchor: str | None  # the scheduled node; None for a chain of injective nodes
    output: str  # the one graph tensor the kernel writes
    inputs: tuple[str, ...]  # graph tensors it reads (constants included), first use first
    epilogue_path: tuple[str, ...] = ()  # nodes changing the index space from the anchor's output to `output`

    @property
    def fused(self) -> bool:
        return len(self.nodes) > 1


def is_injective(node: Node) -> bool:
    op = op_def(node.op)
    return op.fusable and (op.elementwise or op.view or node.op in INJECTIVE_LAYOUT)


def partition(graph: Graph, fuse: bool = True) -> list[Group]:
    """Groups covering every node but the views left between groups, in a valid execution order."""
    consumers = graph.consumers()
    producers = graph.producers()
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    nodes = {n.name: n for n in graph.nodes}
    outputs = set(graph.outputs)
    taken: set[str] = set()  # nodes already in a group
    groups: list[tuple[list[str], str | None, tuple[str, ...]]] = []

    def add_group(members: list[str], anchor: str | None, path: tuple[str, ...]) -> None:
        taken.update(members)
        groups.append((members, anchor, path))

    if fuse:
        for node in graph.nodes:
            if is_injective(node) or node.name in taken or len(node.outputs) != 1 or op_def(node.op).view:
                continue
            members, path = _epilogue(graph, node, order[node.name], nodes, consumers, taken, outputs)
            add_group(members, node.name, path)
        for members, anchor, _ in groups:
            anchor_node = nodes[anchor]  # type: ignore[index]  (every group so far has one)
            epilogue = [nodes[m] for m in members[1:]]
            _prologue(_absorbable_inputs(anchor_node), members, producers, consumers, taken, outputs,
                      anchor_node.op in CONTRACTIONS)
            _prologue(_operands_read_once(graph, epilogue, members, nodes), members, producers, consumers, taken,
                      outputs, cheap_only=False)
            taken.update(members)
    for node in reversed(graph.nodes):
        if node.name in taken or op_def(node.op).view:
            continue  # a view stays a view unless a group takes it
        if not fuse or not is_injective(node) or len(node.outputs) != 1:
            add_group([node.name], None if is_injective(node) else node.name, ())
            continue
        members = [node.name]
        _prologue(_absorbable_inputs(node), members, producers, consumers, taken, outputs, cheap_only=False)
        add_group(members, None, ())
    result = []
    for members, anchor, path in groups:
        members.sort(key=order.__getitem__)
        inside = set(members)
        produced = {o for m in members for o in nodes[m].outputs}
        out = _open_tensors(members, nodes, consumers, outputs)
        if not out:  # only when fusion is off for a node whose output nobody reads
            out = [nodes[members[-1]].outputs[0]]
        reads: dict[str, None] = {}
        for m in members:
            for name in nodes[m].inputs:
                if name and name not in produced:
                    reads[name] = None
        assert len(out) == 1 or not fuse or len(inside) == 1, (members, out)
        result.append(Group(tuple(members), anchor, out[0], tuple(reads), path))
    result.sort(key=lambda g: order[g.nodes[-1]])
    return result


def _open_tensors(members: list[str], nodes: dict[str, Node], consumers: dict[str, list[Node]],
                  outputs: set[str]) -> list[str]:
    inside = set(members)
    return [o for m in members for o in nodes[m].outputs
            if o in outputs or any(c.name not in inside for c in consumers.get(o, ()))]


def _epilogue(graph: Graph, anchor: Node, start: int, nodes: dict[str, Node], consumers: dict[str, list[Node]],
              taken: set[str], outputs: set[str]) -> tuple[list[str], tuple[str, ...]]:
    """The anchor (graph.nodes[start]) and the consumers it absorbs; the index-space path to the
    group's output."""
    space: dict[str, int] = {anchor.outputs[0]: 0}  # group tensor -> index space
    origin: dict[int, tuple[int, str]] = {}  # space -> (parent space, node that changed it)
    tainted: set[str] = set()
    members = [anchor.name]
    for node in graph.nodes[start + 1:]:
        ins = [t for t in node.inputs if t]
        group_ins = [t for t in ins if t in space]
        depends = any(t in tainted for t in ins)
        if not group_ins and not depends:
            continue
        new_space = None
        if not depends and node.name not in taken and len(node.outputs) == 1 and len(members) < MAX_FUSED_NODES:
            new_space = _space_after(graph, node, group_ins, space, origin)
        if new_space is None:
            tainted.update(node.outputs)
            continue
        space[node.outputs[0]] = new_space
        members.append(node.name)
    # the longest prefix leaving exactly one tensor needed outside, not ending in a view
    while len(members) > 1:
        last = nodes[members[-1]]
        if len(_open_tensors(members, nodes, consumers, outputs)) == 1 and not op_def(last.op).view:
            break
        members.pop()
    path = epilogue_path(graph, anchor, members[1:])
    assert path is not None  # every member got an index space above
    return members, path


def epilogue_path(graph: Graph, anchor: Node, epilogue: list[str]) -> tuple[str, ...] | None:
    """The nodes changing the index space from `anchor`'s output to the last of `epilogue` (names
    in topological order, each reading the anchor's output through earlier ones), or None when
    some member may not be an epilogue (see the module docstring)."""
    nodes = {n.name: n for n in graph.nodes}
    space: dict[str, int] = {anchor.outputs[0]: 0}
    origin: dict[int, tuple[int, str]] = {}
    for name in epilogue:
        node = nodes[name]
        group_ins = [t for t in node.inputs if t and t in space]
        new_space = _space_after(graph, node, group_ins, space, origin) if group_ins else None
        if new_space is None:
            return None
        space[node.outputs[0]] = new_space
    path: list[str] = []
    s = space[nodes[epilogue[-1]].outputs[0]] if epilogue else 0
    while s != 0:
        parent, via = origin[s]
        path.append(via)
        s = parent
    return tuple(reversed(path))


def _space_after(graph: Graph, node: Node, group_ins: list[str], space: dict[str, int],
                 origin: dict[int, tuple[int, str]]) -> int | None:
    """The index space of `node`'s output when it may join the epilogue, else None."""
    op = op_def(node.op)
    out_shape = graph.type_of(node.outputs[0]).shape
    if node.op in LAYOUT_INVERTIBLE:
        if [t for t in node.inputs if t] != group_ins[:1] or len(set(group_ins)) != 1:
            return None
        return _new_space(space[group_ins[0]], node.name, origin)
    if not op.elementwise:
        return None
    spaces = {space[t] for t in group_ins}
    if len(spaces) != 1:
        return None
    shapes = {graph.type_of(t).shape for t in group_ins}
    if shapes == {out_shape}:
        return spaces.pop()
    if len(shapes) == 1:
        (shape,) = shapes
        lead = len(out_shape) - len(shape)
        if lead > 0 and out_shape[lead:] == shape and all(d == 1 for d in out_shape[:lead]):
            return _new_space(spaces.pop(), node.name, origin)
    return None


def _new_space(parent: int, via: str, origin: dict[int, tuple[int, str]]) -> int:
    s = len(origin) + 1
    origin[s] = (parent, via)
    return s


def _prologue(pending: list[str], members: list[str], producers: dict[str, Node], consumers: dict[str, list[Node]],
              taken: set[str], outputs: set[str], cheap_only: bool) -> None:
    """Absorb injective producers of the tensors `pending` (recursively) into `members`, while the
    composed expression stays under MAX_INLINED_READS inlined producers."""
    pending = list(pending)
    reads: dict[str, int] = {}  # tensor -> times the composed expression reads it
    for x in pending:
        reads[x] = reads.get(x, 0) + 1
    inlined = 0
    limit = len(members) + MAX_CONTRACTION_PROLOGUE if cheap_only else MAX_FUSED_NODES
    while pending and len(members) < min(limit, MAX_FUSED_NODES):
        t = pending.pop()
        producer = producers.get(t)
        if producer is None or producer.name in taken or producer.name in members or t in outputs:
            continue
        if any(indices_operand(c.op, pos) for c in consumers.get(t, ()) for pos, x in enumerate(c.inputs) if x == t):
            continue  # a gather's indices reach memory, where the model checks them (graph/index_checks.py)
        if not is_injective(producer) or len(producer.outputs) != 1:
            continue
        if cheap_only and producer.op in TRANSCENDENTAL:
            continue
        inside = set(members)
        if any(c.name not in inside for c in consumers.get(t, ())):
            continue
        if inlined + reads.get(t, 1) > MAX_INLINED_READS:
            continue  # its expression would be copied too many times: it stays a tensor in memory
        inlined += reads.get(t, 1)
        members.append(producer.name)
        for x in _absorbable_inputs(producer):
            reads[x] = reads.get(x, 0) + reads.get(t, 1)
            pending.append(x)


def _operands_read_once(graph: Graph, epilogue: list[Node], members: list[str], nodes: dict[str, Node]) -> list[str]:
    """The operands from outside the group of its elementwise epilogue nodes that have as many
    elements as the node's output: the fused kernel reads each of their elements once, so their
    injective producers may join it at no recomputation (a residual dequantized from uint8 is read
    as bytes, not as the float32 tensor a kernel of its own would write)."""
    produced = {o for m in members for o in nodes[m].outputs}
    found: list[str] = []
    for node in epilogue:
        if not op_def(node.op).elementwise:
            continue
        size = graph.type_of(node.outputs[0]).size
        found.extend(t for t in _absorbable_inputs(node)
                     if t not in produced and t not in found and graph.type_of(t).size == size)
    return found


def _absorbable_inputs(node: Node) -> list[str]:
    """The inputs whose producers may join `node`'s kernel: all but a gather's indices."""
    return [x for pos, x in enumerate(node.inputs) if x and not indices_operand(node.op, pos)]


__all__ = ["Group", "partition", "is_injective", "epilogue_path", "CONTRACTIONS"]
