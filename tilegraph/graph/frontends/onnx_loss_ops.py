"""ONNX's loss operators, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (registered into
onnx_ops.CONVERTERS), written with existing graph ops (evaluation graphs compute them too):

    picked[n, d..]  = sum over c of where(c == target[n, d..], input[n, c, d..], 0)
    weight[n, d..]  = weight[target] (1 without weights), 0 where target == ignore_index
    loss            = -picked * weight;  reduction: none | sum | mean (sum / sum of weights)
    SoftmaxCrossEntropyLoss: the same on log_softmax(scores, axis=1), which is its second output
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_math_ops import log_softmax
from tilegraph.graph.frontends.onnx_ops import _out, converts
from tilegraph.graph.ir import is_float


def _class_view(e: Emitter, shape: tuple[int, ...], name: str) -> str:
    """0..C-1 along axis 1, shaped (1, C, 1, ...) against (N, C, d...)."""
    view = [1] * len(shape)
    view[1] = shape[1]
    return e.constant(np.arange(shape[1], dtype=np.int64).reshape(view), name)


def negative_log_likelihood(e: Emitter, node: Any, log_prob: str, target: str, weight: str,
                            attrs: dict[str, Any]) -> str:
    name = node.name
    shape = e.type_of(log_prob).shape
    if len(shape) < 2 or e.type_of(target).shape != (shape[0], *shape[2:]):
        raise GraphError(f"node {name!r} ({node.op_type}): target {e.type_of(target)} does not fit input "
                         f"{e.type_of(log_prob)} (N, C, d...) -> (N, d...)")
    dtype = e.type_of(log_prob).dtype
    target64 = e.emit("cast", [target], {"to": "int64"}, f"{name}_target") if e.type_of(target).dtype != "int64" \
        else target
    expanded = e.emit("reshape", [target64], {"shape": (shape[0], 1, *shape[2:])}, f"{name}_target_view")
    hit = e.emit("equal", [_class_view(e, shape, f"{name}_classes"), expanded], name=f"{name}_hit")
    zero = e.constant(np.zeros((), dtype), f"{name}_zero")
    picked = e.emit("reduce_sum", [e.emit("where", [hit, log_prob, zero], name=f"{name}_pick")],
                    {"axes": (1,), "keepdims": 0}, f"{name}_picked")
    if weight:
        weight_view = e.emit("reshape", [weight], {"shape": (1, shape[1]) + (1,) * (len(shape) - 2)},
                             f"{name}_weight_view")
        weights = e.emit("reduce_sum", [e.emit("where", [hit, weight_view, zero], name=f"{name}_wpick")],
                         {"axes": (1,), "keepdims": 0}, f"{name}_weights")
    else:
        weights = e.emit("cast", [_any_class(e, hit, name)], {"to": dtype}, f"{name}_ones")
    if "ignore_index" in attrs:
        ignore = e.constant(np.array(int(attrs["ignore_index"]), np.int64), f"{name}_ignore")
        kept = e.emit("not", [e.emit("equal", [target64, ignore], name=f"{name}_ignored")], name=f"{name}_kept")
        weights = e.emit("where", [kept, weights, zero], name=f"{name}_kept_weights")
    loss = e.emit("neg", [e.emit("mul", [picked, weights], name=f"{name}_weighted")], name=f"{name}_loss")
    reduction = attrs.get("reduction", "mean")
    if reduction == "none":
        return loss
    if reduction not in ("sum", "mean"):
        raise GraphError(f"node {name!r} ({node.op_type}): reduction {reduction!r} is not none, sum or mean")
    total = e.emit("reduce_sum", [loss], {"axes": None, "keepdims": 0}, f"{name}_total")
    if reduction == "sum":
        return total
    return e.emit("div", [total, e.emit("reduce_sum", [weights], {"axes": None, "keepdims": 0}, f"{name}_weight_sum")],
                  name=f"{name}_mean")


def _any_class(e: Emitter, hit: str, name: str) -> str:
    """1 where the target names one of the classes (0 for an index outside them, which ONNX leaves
    to ignore_index), along axis 1 removed: the weight of an unweighted loss."""
    return e.emit("cast", [e.emit("reduce_max", [e.emit("cast", [hit], {"to": "uint8"}, f"{name}_hit8")],
                                  {"axes": (1,), "keepdims": 0}, f"{name}_any8")], {"to": "bool"}, f"{name}_any")


@converts("NegativeLogLikelihoodLoss")
def _nll(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    loss = negative_log_likelihood(e, node, ins[0], ins[1], ins[2] if len(ins) > 2 else "", attrs)
    return [e.emit("identity", [loss], name=f"{node.name}_out", outputs=[_out(node)])]


@converts("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    if not is_float(e.type_of(ins[0]).dtype):
        raise GraphError(f"node {node.name!r} (SoftmaxCrossEntropyLoss) needs float scores, got {e.type_of(ins[0])}")
    log_prob = log_softmax(e, ins[0], 1, f"{node.name}_log_prob")
    loss = negative_log_likelihood(e, node, log_prob, ins[1], ins[2] if len(ins) > 2 else "", attrs)
    outs = [e.emit("identity", [loss], name=f"{node.name}_out", outputs=[_out(node)])]
    if _out(node, 1):
        outs.append(e.emit("identity", [log_prob], name=f"{node.name}_out1", outputs=[_out(node, 1)]))
    return outs
