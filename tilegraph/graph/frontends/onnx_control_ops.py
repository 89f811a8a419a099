"""ONNX control flow whose path is known at compile time (registered into onnx_ops.CONVERTERS).

    If(cond)    the branch `cond` picks, converted in place (its nodes read the enclosing scope)
    Loop        unrolled: the body once per iteration (trip count and condition constants)
    Scan        unrolled over its inputs' static length, outputs stacked

tilegraph compiles one static graph, so the condition must be a constant (computable before run
time), as must a loop's trip count. When one is computed from a model input, compile_model specialises on that input's value
(graph/specialize.py); otherwise the converter refuses naming the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _out, converts


@converts("If")
def _if(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    where = f"node {node.name!r} (If)"
    cond = np.asarray(e.value(ins[0], f"{where} condition"))
    if cond.size != 1:
        raise GraphError(f"{where}: the condition must hold one value, got {cond.size}")
    if e.subgraph is None:
        raise GraphError(f"{where}: this frontend does not convert subgraphs")
    branch = attrs["then_branch"] if bool(cond.reshape(-1)[0]) else attrs["else_branch"]
    odd = [o.name for o in branch.output if o.type.WhichOneof("value") not in (None, "tensor_type")]
    if odd:
        raise GraphError(f"{where}: branch outputs {odd} are sequences or optionals (tilegraph compiles tensors)")
    outs = e.subgraph(branch, f"{where} {'then' if bool(cond.reshape(-1)[0]) else 'else'} branch")
    if len(outs) != len(node.output):
        raise GraphError(f"{where}: the branch gives {len(outs)} outputs, the node has {len(node.output)}")
    return [e.emit("identity", [o], name=f"{node.name}_out{i}", outputs=[_out(node, i)])
            for i, o in enumerate(outs)]


MAX_UNROLLED_ITERATIONS = 4096  # a loop is unrolled into the graph: one copy of its body per iteration


def _stack(e: Emitter, pieces: list[str], axis: int, name: str) -> str:
    """`pieces` (one shape) stacked along a new axis `axis`."""
    shape = e.type_of(pieces[0]).shape
    axis = axis % (len(shape) + 1)
    grown = (*shape[:axis], 1, *shape[axis:])
    parts = [e.emit("reshape", [p], {"shape": grown}, f"{name}_piece{i}") for i, p in enumerate(pieces)]
    return parts[0] if len(parts) == 1 else e.emit("concat", parts, {"axis": axis}, f"{name}_stacked")


def _finish(e: Emitter, node: Any, tensors: list[str]) -> list[str]:
    return [e.emit("identity", [t], name=f"{node.name}_out{i}", outputs=[_out(node, i)]) for i, t in enumerate(tensors)]


@converts("Loop")
def _loop(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Unrolled: the body once per iteration, the trip count and the condition known at compile
    time (the condition the body computes must fold to a constant after every iteration)."""
    where = f"node {node.name!r} (Loop)"
    if e.subgraph is None:
        raise GraphError(f"{where}: this frontend does not convert subgraphs")
    body = attrs["body"]
    trip = int(np.asarray(e.value(ins[0], f"{where} trip count")).reshape(-1)[0]) if ins and ins[0] else None
    going = bool(np.asarray(e.value(ins[1], f"{where} condition")).reshape(-1)[0]) if len(ins) > 1 and ins[1] else True
    if trip is None and not (len(ins) > 1 and ins[1]):
        raise GraphError(f"{where}: neither a trip count nor a condition: the loop never ends")
    states = list(ins[2:])
    odd = [o.name for o in body.output if o.type.WhichOneof("value") not in (None, "tensor_type")]
    if odd:
        raise GraphError(f"{where}: body outputs {odd} are sequences or optionals (tilegraph compiles tensors)")
    scans: list[list[str]] = [[] for _ in range(len(body.output) - 1 - len(states))]
    iteration = 0
    while going and (trip is None or iteration < trip):
        if iteration >= MAX_UNROLLED_ITERATIONS:
            raise GraphError(f"{where}: more than {MAX_UNROLLED_ITERATIONS} iterations to unroll")
        counter = e.constant(np.array(iteration, np.int64), f"{node.name}_iteration{iteration}")
        condition = e.constant(np.array(True), f"{node.name}_condition{iteration}")
        outs = e.subgraph(body, f"{where} iteration {iteration}", [counter, condition, *states])
        states = outs[1:1 + len(states)]
        for column, tensor in zip(scans, outs[1 + len(states):]):
            column.append(tensor)
        going = bool(np.asarray(e.value(outs[0], f"{where} condition after iteration {iteration}")).reshape(-1)[0])
        iteration += 1
    if scans and iteration == 0:
        raise GraphError(f"{where}: no iteration runs, so its scan outputs have no shape to stack")
    return _finish(e, node, [*states, *(_stack(e, column, 0, f"{node.name}_scan{k}")
                                       for k, column in enumerate(scans))])


@converts("Scan")
def _scan(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Unrolled over the scan inputs' (static) length: slice t of each scan input, the body, the
    scan outputs stacked along their axes (in reverse where a direction says so)."""
    where = f"node {node.name!r} (Scan)"
    if e.subgraph is None:
        raise GraphError(f"{where}: this frontend does not convert subgraphs")
    body, count = attrs["body"], int(attrs["num_scan_inputs"])
    states, sequences = list(ins[:len(ins) - count]), list(ins[len(ins) - count:])
    in_axes = [int(a) for a in attrs.get("scan_input_axes", [0] * count)]
    in_dirs = [int(d) for d in attrs.get("scan_input_directions", [0] * count)]
    n_out = len(body.output) - len(states)
    out_axes = [int(a) for a in attrs.get("scan_output_axes", [0] * n_out)]
    out_dirs = [int(d) for d in attrs.get("scan_output_directions", [0] * n_out)]
    shapes = [e.type_of(s).shape for s in sequences]
    in_axes = [a % len(s) for a, s in zip(in_axes, shapes)]
    lengths = {s[a] for a, s in zip(in_axes, shapes)}
    if len(lengths) != 1 or not count:
        raise GraphError(f"{where}: the scan inputs disagree on their length ({sorted(lengths)})")
    length = lengths.pop()
    if length > MAX_UNROLLED_ITERATIONS:
        raise GraphError(f"{where}: more than {MAX_UNROLLED_ITERATIONS} iterations to unroll")
    scans: list[list[str]] = [[] for _ in range(n_out)]
    for t in range(length):
        slices = []
        for i, (x, axis, shape) in enumerate(zip(sequences, in_axes, shapes)):
            at = length - 1 - t if in_dirs[i] else t
            begin = tuple(at if d == axis else 0 for d in range(len(shape)))
            end = tuple(at + 1 if d == axis else n for d, n in enumerate(shape))
            piece = e.emit("slice", [x], {"begin": begin, "end": end, "steps": (1,) * len(shape)},
                           f"{node.name}_in{i}_t{t}")
            slices.append(e.emit("reshape", [piece], {"shape": shape[:axis] + shape[axis + 1:]},
                                 f"{node.name}_in{i}_t{t}_row"))
        outs = e.subgraph(body, f"{where} step {t}", [*states, *slices])
        states = outs[:len(states)]
        for column, tensor in zip(scans, outs[len(states):]):
            column.append(tensor)
    stacked = [_stack(e, column[::-1] if out_dirs[k] else column, out_axes[k], f"{node.name}_scan{k}")
               for k, column in enumerate(scans)]
    return _finish(e, node, [*states, *stacked])
