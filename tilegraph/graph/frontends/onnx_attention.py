"""ONNX Attention (opsets 23 to the newest) written with graph ops, as ONNX's reference defines it:

    Q, K, V (B, S, hidden) -> (B, heads, S, head) when 3-D; K, V after past_key/past_value
    bias   = mask (bool: 0 / -inf; float: added), causal and sliding-window frontiers (offset by
             the past length, or per batch by nonpad_kv_seqlen), nonpad padding
    scores = softcap(Q sqrt(scale) @ (K sqrt(scale))^T) + bias           (GQA: K, V heads repeated)
    Y      = where(every key of the row masked, 0, softmax(scores)) @ V
Outputs: Y, present_key, present_value, and the scores at qk_matmul_output_mode (0/1: the product
after softcap, 2: with the bias, 3: the probabilities).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _out, converts, dtype_of
from tilegraph.graph.ir import is_float


def _input(ins: list[str], index: int) -> str:
    return ins[index] if len(ins) > index else ""


def _to_heads(e: Emitter, x: str, heads: int | None, name: str) -> str:
    """(B, S, heads * head) -> (B, heads, S, head); 4-D inputs as they are."""
    shape = e.type_of(x).shape
    if len(shape) == 4:
        return x
    if len(shape) != 3 or not heads or shape[2] % heads:
        raise GraphError(f"{name}: {e.type_of(x)} is not (B, S, heads * head) for {heads} heads")
    split = e.emit("reshape", [x], {"shape": (shape[0], shape[1], heads, shape[2] // heads)}, f"{name}_split")
    return e.emit("transpose", [split], {"perm": (0, 2, 1, 3)}, f"{name}_heads")


class _Bias:
    """The additive bias, built up as ONNX's reference does (None: all zeros so far)."""

    def __init__(self, e: Emitter, dtype: str, name: str):
        self.e, self.dtype, self.name, self.value = e, dtype, name, None

    def constant(self, value: float) -> str:
        return self.e.constant(np.array(value, self.dtype), f"{self.name}_c")

    def add(self, term: str) -> None:
        self.value = term if self.value is None else self.e.emit("add", [self.value, term], name=f"{self.name}_add")

    def allowed(self, mask: str) -> str:
        """A bool `mask` (True: attend) as 0 / -inf."""
        return self.e.emit("where", [mask, self.constant(0.0), self.constant(-math.inf)], name=f"{self.name}_select")


def _frontier(e: Emitter, q_len: int, kv_len: int, offset: int | str, name: str) -> str:
    """i + offset - j per (query i, key j): (q, kv) for a fixed offset, (B, 1, q, kv) per batch."""
    diff = np.arange(q_len, dtype=np.int64)[:, None] - np.arange(kv_len, dtype=np.int64)[None, :]
    if isinstance(offset, int):
        return e.constant(diff + offset, f"{name}_frontier")
    per_batch = e.emit("reshape", [offset], {"shape": (e.type_of(offset).size, 1, 1, 1)}, f"{name}_offsets")
    return e.emit("add", [e.constant(diff, f"{name}_diff"), per_batch], name=f"{name}_frontier")


@converts("Attention")
def _attention(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    name = node.name or "attention"
    q, k, v = ins[:3]
    mask, past_key, past_value, nonpad = (_input(ins, i) for i in (3, 4, 5, 6))
    dtype = e.type_of(q).dtype
    if not is_float(dtype):
        raise GraphError(f"node {name!r} (Attention) needs float inputs, got {e.type_of(q)}")
    three_d = len(e.type_of(q).shape) == 3
    q = _to_heads(e, q, attrs.get("q_num_heads"), f"{name}_q")
    k = _to_heads(e, k, attrs.get("kv_num_heads"), f"{name}_k")
    v = _to_heads(e, v, attrs.get("kv_num_heads"), f"{name}_v")
    batch, q_heads, q_len, head = e.type_of(q).shape
    scale = float(attrs["scale"]) if "scale" in attrs else 1 / math.sqrt(head)
    root = e.constant(np.array(math.sqrt(scale), dtype), f"{name}_root_scale")
    if past_key:
        k = e.emit("concat", [past_key, k], {"axis": 2}, f"{name}_present_key")
    if past_value:
        v = e.emit("concat", [past_value, v], {"axis": 2}, f"{name}_present_value")
    present_key, present_value = k, v
    kv_len = e.type_of(k).shape[2]
    past_len = e.type_of(past_key).shape[2] if past_key else 0
    bias = _Bias(e, dtype, f"{name}_bias")
    if mask:
        short = kv_len - e.type_of(mask).shape[-1]
        if short > 0:  # a mask shorter than the keys: the rest masked out
            fill = np.zeros(e.type_of(mask).shape[:-1] + (short,), e.type_of(mask).dtype)
            fill[...] = False if e.type_of(mask).dtype == "bool" else -np.inf
            mask = e.emit("concat", [mask, e.constant(fill, f"{name}_mask_fill")], {"axis": -1}, f"{name}_mask_padded")
        bias.add(bias.allowed(mask) if e.type_of(mask).dtype == "bool" else mask)
    offset: int | str = past_len
    if nonpad and not past_key:
        lengths = e.emit("cast", [nonpad], {"to": "int64"}, f"{name}_nonpad")
        offset = e.emit("sub", [lengths, e.constant(np.array(q_len, np.int64), f"{name}_q_len")], name=f"{name}_offset")
    if attrs.get("is_causal", 0):
        frontier = _frontier(e, q_len, kv_len, offset, f"{name}_causal")
        bias.add(bias.allowed(e.emit("greater_equal", [frontier, e.constant(np.array(0, np.int64), f"{name}_zero")],
                                     name=f"{name}_causal_allowed")))
    left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
    if left >= 0 or right >= 0:
        frontier = _frontier(e, q_len, kv_len, offset, f"{name}_window")
        allowed = []
        if left >= 0:
            allowed.append(e.emit("less_equal", [frontier, e.constant(np.array(left, np.int64), f"{name}_left")],
                                  name=f"{name}_within_left"))
        if right >= 0:
            allowed.append(e.emit("greater_equal", [frontier, e.constant(np.array(-right, np.int64), f"{name}_right")],
                                  name=f"{name}_within_right"))
        both = allowed[0] if len(allowed) == 1 else e.emit("and", allowed, name=f"{name}_window_allowed")
        bias.add(bias.allowed(both))
    if nonpad:
        lengths = e.emit("reshape", [e.emit("cast", [nonpad], {"to": "int64"}, f"{name}_pad_len")],
                         {"shape": (e.type_of(nonpad).size, 1, 1, 1)}, f"{name}_pad_view")
        keys = e.constant(np.arange(kv_len, dtype=np.int64), f"{name}_keys")
        bias.add(bias.allowed(e.emit("less", [keys, lengths], name=f"{name}_unpadded")))
    kv_heads = e.type_of(k).shape[1]
    if q_heads != kv_heads:
        if q_heads % kv_heads:
            raise GraphError(f"node {name!r} (Attention): {q_heads} query heads do not group {kv_heads} key heads")
        repeat = e.constant(np.repeat(np.arange(kv_heads, dtype=np.int64), q_heads // kv_heads), f"{name}_groups")
        k = e.emit("gather", [k, repeat], {"axis": 1}, f"{name}_k_grouped")
        v = e.emit("gather", [v, repeat], {"axis": 1}, f"{name}_v_grouped")
    scores = e.emit("matmul", [e.emit("mul", [q, root], name=f"{name}_q_scaled"),
                               e.emit("transpose", [e.emit("mul", [k, root], name=f"{name}_k_scaled")],
                                      {"perm": (0, 1, 3, 2)}, f"{name}_kt")], name=f"{name}_scores")
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        cap = e.constant(np.array(softcap, dtype), f"{name}_softcap")
        scores = e.emit("mul", [e.emit("tanh", [e.emit("div", [scores, cap], name=f"{name}_cap_in")],
                                       name=f"{name}_cap_tanh"), cap], name=f"{name}_capped")
    with_bias = scores if bias.value is None else e.emit("add", [scores, bias.value], name=f"{name}_biased")
    logits = with_bias
    if "softmax_precision" in attrs:
        logits = e.emit("cast", [logits], {"to": dtype_of(int(attrs["softmax_precision"]), f"node {name!r}")},
                        f"{name}_softmax_in")
    probs = e.emit("softmax", [logits], {"axis": -1}, f"{name}_softmax")
    if bias.value is not None:  # rows with every key masked: 0, not NaN
        row_max = e.emit("reduce_max", [bias.value], {"axes": (-1,), "keepdims": 1}, f"{name}_bias_max")
        masked = e.emit("equal", [row_max, bias.constant(-math.inf)], name=f"{name}_row_masked")
        probs = e.emit("where", [masked, e.constant(np.array(0, e.type_of(probs).dtype), f"{name}_zero_p"), probs],
                       name=f"{name}_guarded")
    if e.type_of(probs).dtype != dtype:
        probs = e.emit("cast", [probs], {"to": dtype}, f"{name}_probs")
    y = e.emit("matmul", [probs, v], name=f"{name}_context")
    if three_d:
        y = e.emit("transpose", [y], {"perm": (0, 2, 1, 3)}, f"{name}_merge")
        shape = e.type_of(y).shape
        y = e.emit("reshape", [y], {"shape": (shape[0], shape[1], shape[2] * shape[3])}, f"{name}_merged")
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    qk_output = {2: with_bias, 3: probs}.get(mode, scores)
    outs = []
    for index, value in enumerate((y, present_key, present_value, qk_output)):
        if _out(node, index):
            outs.append(e.emit("identity", [value], name=f"{name}_out{index}", outputs=[_out(node, index)]))
        else:
            outs.append("")
    return outs
