"""ONNX LSTM, GRU and RNN as a time loop unrolled over the (static) sequence, per direction:

    gates_x = X @ W^T + Wb + Rb                      one matmul for every time step at once
    for t in time order (reversed for the reverse direction):
        gates = gates_x[t] + H @ R^T                 then the cell's equations (ONNX's, gate order
        H, C  = cell(gates, H, C)                    i o f c for LSTM, z r h for GRU)
    Y = the H of every step, Y_h = the last H, Y_c = the last C

Each step's elementwise cell fuses into one kernel beside its matmul. Activations: Sigmoid, Tanh,
Relu, HardSigmoid, LeakyRelu, Affine, ScaledTanh, ThresholdedRelu, Elu, Softsign, Softplus. A
sequence_lens shorter than the sequence for some batch entry is refused (padded batches).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_math_ops import softplus
from tilegraph.graph.frontends.onnx_ops import _out, converts

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
# activation -> (its parameters' defaults (alpha, beta), or () when it takes none)
PARAMETERS = {"Sigmoid": (), "Tanh": (), "Relu": (), "Softsign": (), "Softplus": (), "HardSigmoid": (0.2, 0.5),
              "LeakyRelu": (0.01,), "Affine": (1.0, 0.0), "ScaledTanh": (1.0, 1.0), "ThresholdedRelu": (1.0,),
              "Elu": (1.0,)}


class _Activation:
    def __init__(self, name: str, params: tuple[float, ...]):
        self.name, self.params = name, params

    def __call__(self, e: Emitter, x: str, name: str) -> str:
        def c(v: float) -> str:
            return e.constant(np.array(v, e.type_of(x).dtype), f"{name}_c")

        kind = self.name
        if kind in ("Sigmoid", "Tanh", "Relu"):
            return e.emit(kind.lower(), [x], name=name)
        if kind == "HardSigmoid":
            return e.emit("hard_sigmoid", [x], {"alpha": self.params[0], "beta": self.params[1]}, name)
        if kind == "Affine":
            return e.emit("add", [e.emit("mul", [x, c(self.params[0])], name=f"{name}_a"), c(self.params[1])], name=name)
        if kind == "ScaledTanh":
            inner = e.emit("tanh", [e.emit("mul", [x, c(self.params[1])], name=f"{name}_b")], name=f"{name}_t")
            return e.emit("mul", [inner, c(self.params[0])], name=name)
        if kind == "LeakyRelu":
            return e.emit("where", [e.emit("less", [x, c(0.0)], name=f"{name}_neg"),
                                    e.emit("mul", [x, c(self.params[0])], name=f"{name}_s"), x], name=name)
        if kind == "ThresholdedRelu":
            return e.emit("where", [e.emit("greater", [x, c(self.params[0])], name=f"{name}_gt"), x, c(0.0)], name=name)
        if kind == "Elu":
            em1 = e.emit("sub", [e.emit("exp", [x], name=f"{name}_exp"), c(1.0)], name=f"{name}_em1")
            return e.emit("where", [e.emit("greater", [x, c(0.0)], name=f"{name}_pos"), x,
                                    e.emit("mul", [em1, c(self.params[0])], name=f"{name}_s")], name=name)
        if kind == "Softsign":
            return e.emit("div", [x, e.emit("add", [e.emit("abs", [x], name=f"{name}_abs"), c(1.0)], name=f"{name}_d")],
                          name=name)
        return softplus(e, x, name)


def _activations(node: Any, attrs: dict[str, Any], directions: int) -> list[list[_Activation]]:
    per_direction = len(DEFAULT_ACTIVATIONS[node.op_type])
    names = list(attrs.get("activations", DEFAULT_ACTIVATIONS[node.op_type] * directions))
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    if len(names) != per_direction * directions:
        raise GraphError(f"node {node.name!r} ({node.op_type}): {len(names)} activations for {directions} "
                         f"direction(s) of {per_direction}")
    out = []
    for name in names:
        name = name.decode() if isinstance(name, bytes) else name
        match = {k.lower(): k for k in PARAMETERS}.get(name.lower())
        if match is None:
            raise GraphError(f"node {node.name!r} ({node.op_type}): activation {name!r} is not supported "
                             f"({', '.join(PARAMETERS)})")
        defaults = PARAMETERS[match]
        params = []
        for index, default in enumerate(defaults):
            source = alphas if index == 0 else betas
            params.append(float(source.pop(0)) if source else default)
        out.append(_Activation(match, tuple(params)))
    return [out[d * per_direction:(d + 1) * per_direction] for d in range(directions)]


def _row(e: Emitter, x: str, index: int, name: str) -> str:
    """x[index] with that axis removed (x's first axis)."""
    shape = e.type_of(x).shape
    piece = e.emit("slice", [x], {"begin": (index,) + (0,) * (len(shape) - 1), "end": (index + 1, *shape[1:]),
                                  "steps": (1,) * len(shape)}, f"{name}_slice")
    return e.emit("reshape", [piece], {"shape": shape[1:]}, name)


def _columns(e: Emitter, x: str, start: int, stop: int, name: str) -> str:
    shape = e.type_of(x).shape
    return e.emit("slice", [x], {"begin": (0,) * (len(shape) - 1) + (start,), "end": (*shape[:-1], stop),
                                 "steps": (1,) * len(shape)}, name)


@converts("LSTM", "GRU", "RNN")
def _recurrent(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    name, op = node.name or node.op_type.lower(), node.op_type
    x, w, r = ins[:3]
    optional = [ins[i] if len(ins) > i and ins[i] else "" for i in range(3, 8)]
    bias, lengths, initial_h = optional[:3]
    initial_c = optional[3] if op == "LSTM" else ""
    peepholes = optional[4] if op == "LSTM" else ""
    if op == "LSTM" and attrs.get("input_forget", 0):
        raise GraphError(f"node {name!r} (LSTM): input_forget=1 (coupled gates) is not supported")
    if attrs.get("layout", 0):
        x = e.emit("transpose", [x], {"perm": (1, 0, 2)}, f"{name}_time_major")
    seq, batch, _ = e.type_of(x).shape
    if lengths:
        values = np.asarray(e.value(lengths, f"node {name!r} ({op}) sequence_lens")).reshape(-1)
        if (values != seq).any():
            raise GraphError(f"node {name!r} ({op}): sequence_lens {values.tolist()} shorter than the sequence "
                             f"({seq}) are not supported")
    direction = attrs.get("direction", "forward")
    directions = 2 if direction == "bidirectional" else 1
    hidden = int(attrs.get("hidden_size", e.type_of(r).shape[-1]))
    gates = GATES[op]
    activations = _activations(node, attrs, directions)
    clip = float(attrs["clip"]) if "clip" in attrs else None
    dtype = e.type_of(x).dtype
    outputs_h, last_h, last_c = [], [], []
    for d in range(directions):
        reverse = direction == "reverse" or d == 1
        tag = f"{name}_d{d}"
        w_d = e.emit("transpose", [_row(e, w, d, f"{tag}_w")], {"perm": (1, 0)}, f"{tag}_wt")  # (input, G*hidden)
        r_d = e.emit("transpose", [_row(e, r, d, f"{tag}_r")], {"perm": (1, 0)}, f"{tag}_rt")  # (hidden, G*hidden)
        gates_x = e.emit("matmul", [x, w_d], name=f"{tag}_gates_x")  # (seq, batch, G*hidden)
        recurrent_bias = ""
        if bias:
            b_d = _row(e, bias, d, f"{tag}_b")
            wb, rb = _columns(e, b_d, 0, gates * hidden, f"{tag}_wb"), _columns(e, b_d, gates * hidden,
                                                                                 2 * gates * hidden, f"{tag}_rb")
            if op == "GRU" and attrs.get("linear_before_reset", 0):
                # Rbh stays inside the reset product: add Rbz and Rbr here, Rbh in the step
                gates_x = e.emit("add", [gates_x, wb], name=f"{tag}_gates_xb")
                gates_x = e.emit("add", [gates_x, e.emit("concat", [_columns(e, rb, 0, 2 * hidden, f"{tag}_rbzr"),
                                                                    e.constant(np.zeros(hidden, dtype), f"{tag}_0")],
                                                         {"axis": 0}, f"{tag}_rbzr0")], name=f"{tag}_gates_xbr")
                recurrent_bias = _columns(e, rb, 2 * hidden, 3 * hidden, f"{tag}_rbh")
            else:
                gates_x = e.emit("add", [gates_x, e.emit("add", [wb, rb], name=f"{tag}_bias")], name=f"{tag}_gates_xb")
        h = _row(e, initial_h, d, f"{tag}_h0") if initial_h else e.constant(np.zeros((batch, hidden), dtype), f"{tag}_h0")
        c = (_row(e, initial_c, d, f"{tag}_c0") if initial_c else e.constant(np.zeros((batch, hidden), dtype),
                                                                            f"{tag}_c0")) if op == "LSTM" else ""
        peep = [_columns(e, _row(e, peepholes, d, f"{tag}_p"), k * hidden, (k + 1) * hidden, f"{tag}_p{k}")
                for k in range(3)] if peepholes else []
        steps = []
        for t in (reversed(range(seq)) if reverse else range(seq)):
            step = f"{tag}_t{t}"
            xg = _row(e, gates_x, t, f"{step}_xg")
            h, c = _cell(e, op, attrs, xg, h, c, r_d, recurrent_bias, peep, activations[d], clip, hidden, step)
            steps.append((t, h))
        steps.sort()
        outputs_h.append(e.emit("concat", [e.emit("reshape", [s], {"shape": (1, 1, batch, hidden)}, f"{tag}_y{t}")
                                           for t, s in steps], {"axis": 0}, f"{tag}_y"))
        last_h.append(e.emit("reshape", [h], {"shape": (1, batch, hidden)}, f"{tag}_hn"))
        if op == "LSTM":
            last_c.append(e.emit("reshape", [c], {"shape": (1, batch, hidden)}, f"{tag}_cn"))
    y = outputs_h[0] if directions == 1 else e.emit("concat", outputs_h, {"axis": 1}, f"{name}_y")
    y_h = last_h[0] if directions == 1 else e.emit("concat", last_h, {"axis": 0}, f"{name}_hn")
    y_c = (last_c[0] if directions == 1 else e.emit("concat", last_c, {"axis": 0}, f"{name}_cn")) if last_c else ""
    if attrs.get("layout", 0):
        y = e.emit("transpose", [y], {"perm": (2, 0, 1, 3)}, f"{name}_y_batch_major")
        y_h = e.emit("transpose", [y_h], {"perm": (1, 0, 2)}, f"{name}_hn_batch_major")
        if y_c:
            y_c = e.emit("transpose", [y_c], {"perm": (1, 0, 2)}, f"{name}_cn_batch_major")
    outs = []
    for index, value in enumerate((y, y_h, y_c)):
        outs.append(e.emit("identity", [value], name=f"{name}_out{index}", outputs=[_out(node, index)])
                    if _out(node, index) and value else "")
    return outs


def _clipped(e: Emitter, x: str, clip: float | None, name: str) -> str:
    return x if clip is None else e.emit("clip", [x], {"lo": -clip, "hi": clip}, name)


def _cell(e: Emitter, op: str, attrs: dict[str, Any], xg: str, h: str, c: str, r_t: str, recurrent_bias: str,
          peep: list[str], act: list[_Activation], clip: float | None, hidden: int, name: str) -> tuple[str, str]:
    def gate(k: int, tensor: str) -> str:
        return _columns(e, tensor, k * hidden, (k + 1) * hidden, f"{name}_g{k}")

    if op == "GRU":
        r_z, r_r, r_h = (_columns(e, r_t, k * hidden, (k + 1) * hidden, f"{name}_r{k}") for k in range(3))
        hz, hr = (e.emit("matmul", [h, rk], name=f"{name}_hr{k}") for k, rk in ((0, r_z), (1, r_r)))
        z = act[0](e, _clipped(e, e.emit("add", [gate(0, xg), hz], name=f"{name}_z_in"), clip, f"{name}_zc"), f"{name}_z")
        reset = act[0](e, _clipped(e, e.emit("add", [gate(1, xg), hr], name=f"{name}_r_in"), clip, f"{name}_rc"),
                       f"{name}_reset")
        if attrs.get("linear_before_reset", 0):
            hh = e.emit("matmul", [h, r_h], name=f"{name}_hh")
            if recurrent_bias:
                hh = e.emit("add", [hh, recurrent_bias], name=f"{name}_hhb")
            inner = e.emit("mul", [reset, hh], name=f"{name}_rh")
        else:
            inner = e.emit("matmul", [e.emit("mul", [reset, h], name=f"{name}_rh0"), r_h], name=f"{name}_rh")
        candidate = act[1](e, _clipped(e, e.emit("add", [gate(2, xg), inner], name=f"{name}_h_in"), clip,
                                       f"{name}_hc"), f"{name}_cand")
        one = e.constant(np.array(1.0, e.type_of(h).dtype), f"{name}_one")
        keep = e.emit("mul", [z, h], name=f"{name}_keep")
        new = e.emit("mul", [e.emit("sub", [one, z], name=f"{name}_1mz"), candidate], name=f"{name}_new")
        return e.emit("add", [new, keep], name=f"{name}_h"), ""
    pre = e.emit("add", [xg, e.emit("matmul", [h, r_t], name=f"{name}_hr")], name=f"{name}_pre")
    if op == "RNN":
        return act[0](e, _clipped(e, pre, clip, f"{name}_clip"), f"{name}_h"), ""
    i_in, o_in, f_in, c_in = (gate(k, pre) for k in range(4))
    if peep:
        i_in = e.emit("add", [i_in, e.emit("mul", [peep[0], c], name=f"{name}_pi")], name=f"{name}_i_peep")
        f_in = e.emit("add", [f_in, e.emit("mul", [peep[2], c], name=f"{name}_pf")], name=f"{name}_f_peep")
    i = act[0](e, _clipped(e, i_in, clip, f"{name}_ic"), f"{name}_i")
    f = act[0](e, _clipped(e, f_in, clip, f"{name}_fc"), f"{name}_f")
    candidate = act[1](e, _clipped(e, c_in, clip, f"{name}_cc"), f"{name}_cand")
    c_new = e.emit("add", [e.emit("mul", [f, c], name=f"{name}_fc_"), e.emit("mul", [i, candidate], name=f"{name}_ic_")],
                   name=f"{name}_c")
    if peep:
        o_in = e.emit("add", [o_in, e.emit("mul", [peep[1], c_new], name=f"{name}_po")], name=f"{name}_o_peep")
    o = act[0](e, _clipped(e, o_in, clip, f"{name}_oc"), f"{name}_o")
    return e.emit("mul", [o, act[2](e, c_new, f"{name}_hact")], name=f"{name}_h"), c_new
