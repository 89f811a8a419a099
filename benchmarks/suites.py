"""The benchmark suites: which workloads are raced, in a form every system can understand.

A BenchCase names one workload twice: for tilegraph (a workload id or an `op:shape` spec) and for
the peers (a canonical op with named parameters, below). Canonical ops and their input layouts:

    matmul          M, K, N                 a (M, K), b (K, N)            -> (M, N)
    batch_matmul    B, M, K, N              a (B, M, K), b (B, K, N)      -> (B, M, N)
    conv2d_nhwc     N, H, W, CI, CO, KH, KW, stride, pad, dilation, groups
                                            data (N, H, W, CI), weight (KH, KW, CI/groups, CO) -> NHWC
    depthwise_conv2d_nhwc  N, H, W, C, K, stride, pad
                                            data (N, H, W, C), weight (K, K, C, 1) -> NHWC
    conv1d_nlc      N, L, CI, CO, K, stride, pad   data (N, L, CI), weight (K, CI, CO) -> NLC
    conv3d_ndhwc    N, D, H, W, CI, CO, K, stride, pad, dilation
                                            data (N, D, H, W, CI), weight (K, K, K, CI, CO) -> NDHWC
    conv2d_bn_relu  as conv2d_nhwc          + bias, bn_scale, bn_offset (CO,): relu((conv + bias) * scale + offset)
    transpose_batch_matmul  B, seq, heads, dim
                                            query, value (B, seq, heads, dim) -> (B, heads, seq, seq)
    softmax         M, N                    x (M, N), softmax over the last axis
    norm            B, M, N                 x (B, M, N) -> (B,): sqrt(sum of squares)

Where tilegraph is importable, ansor-cpu uses tilegraph.testing's inputs and references instead
(conv3d has no harness reference: it is only raced there).

`canonical_inputs` and `reference` give float32 inputs and float64 numpy outputs for these, so
the peers can be raced (and checked) even where tilegraph is not importable.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks import SUITES  # noqa: E402 (defined where importing it loads nothing heavy)


@dataclass(frozen=True)
class BenchCase:
    """One workload of a suite. `op`/`params` are canonical (see module doc); op None = peers cannot express it."""

    suite: str
    name: str
    op: str | None
    params: dict[str, int] = field(default_factory=dict)
    workload_id: str | None = None  # tilegraph.workloads.get(id, batch)
    spec: str | None = None  # tilegraph.workloads.from_spec(spec)
    batch: int = 1

    def describe(self) -> str:
        if self.op is None:
            return self.workload_id or self.spec or self.name
        return f"{self.op}(" + ",".join(f"{k}={v}" for k, v in self.params.items()) + ")"

    def flops(self) -> int:
        """FLOPs of the canonical op (2 per multiply-add); tilegraph's wl.flops() is preferred when present."""
        p = self.params
        if self.op == "matmul":
            return 2 * p["M"] * p["K"] * p["N"]
        if self.op == "batch_matmul":
            return 2 * p["B"] * p["M"] * p["K"] * p["N"]
        if self.op in ("conv2d_nhwc", "conv2d_bn_relu"):
            oh, ow = conv_out(p["H"], p["KH"], p["stride"], p["pad"], p["dilation"]), \
                conv_out(p["W"], p["KW"], p["stride"], p["pad"], p["dilation"])
            return 2 * p["N"] * oh * ow * p["CO"] * p["KH"] * p["KW"] * p["CI"] // p["groups"]
        if self.op == "depthwise_conv2d_nhwc":
            oh, ow = conv_out(p["H"], p["K"], p["stride"], p["pad"]), conv_out(p["W"], p["K"], p["stride"], p["pad"])
            return 2 * p["N"] * oh * ow * p["C"] * p["K"] * p["K"]
        if self.op == "conv1d_nlc":
            return 2 * p["N"] * conv_out(p["L"], p["K"], p["stride"], p["pad"]) * p["CO"] * p["K"] * p["CI"]
        if self.op == "transpose_batch_matmul":
            return 2 * p["B"] * p["heads"] * p["seq"] * p["seq"] * p["dim"]
        if self.op == "softmax":
            return 4 * p["M"] * p["N"]
        if self.op == "norm":
            return 2 * p["B"] * p["M"] * p["N"]
        return 0


def conv_out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def conv2d(n: int, h: int, w: int, ci: int, co: int, k: int, stride: int, pad: int,
           dilation: int = 1, groups: int = 1) -> dict[str, int]:
    return {"N": n, "H": h, "W": w, "CI": ci, "CO": co, "KH": k, "KW": k, "stride": stride, "pad": pad,
            "dilation": dilation, "groups": groups}


# ----------------------------------------------------------------------------- inputs, references


def input_shapes(op: str, p: dict[str, int]) -> list[tuple[int, ...]]:
    if op == "matmul":
        return [(p["M"], p["K"]), (p["K"], p["N"])]
    if op == "batch_matmul":
        return [(p["B"], p["M"], p["K"]), (p["B"], p["K"], p["N"])]
    if op == "conv2d_nhwc":
        return [(p["N"], p["H"], p["W"], p["CI"]), (p["KH"], p["KW"], p["CI"] // p["groups"], p["CO"])]
    if op == "conv2d_bn_relu":
        return [(p["N"], p["H"], p["W"], p["CI"]), (p["KH"], p["KW"], p["CI"] // p["groups"], p["CO"]),
                (p["CO"],), (p["CO"],), (p["CO"],)]
    if op == "conv3d_ndhwc":
        k = p["K"]
        return [(p["N"], p["D"], p["H"], p["W"], p["CI"]), (k, k, k, p["CI"], p["CO"])]
    if op == "transpose_batch_matmul":
        return [(p["B"], p["seq"], p["heads"], p["dim"])] * 2
    if op == "depthwise_conv2d_nhwc":
        return [(p["N"], p["H"], p["W"], p["C"]), (p["K"], p["K"], p["C"], 1)]
    if op == "conv1d_nlc":
        return [(p["N"], p["L"], p["CI"]), (p["K"], p["CI"], p["CO"])]
    if op == "softmax":
        return [(p["M"], p["N"])]
    if op == "norm":
        return [(p["B"], p["M"], p["N"])]
    raise ValueError(f"unknown canonical op {op!r}")


def canonical_inputs(case: BenchCase, seed: int = 0) -> list[np.ndarray]:
    """float32 inputs in the canonical layouts, uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, size=s).astype(np.float32) for s in input_shapes(case.op, case.params)]


def _conv_nhwc_f64(data: np.ndarray, weight: np.ndarray, stride: int, pad: int, dilation: int, groups: int) -> np.ndarray:
    n, h, w, ci = data.shape
    kh, kw, cig, co = weight.shape
    oh, ow = conv_out(h, kh, stride, pad, dilation), conv_out(w, kw, stride, pad, dilation)
    x = np.pad(data.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    wt = weight.astype(np.float64)
    cog = co // groups
    out = np.zeros((n, oh, ow, co))
    for r in range(kh):
        for s in range(kw):
            rows = x[:, r * dilation: r * dilation + stride * (oh - 1) + 1: stride,
                     s * dilation: s * dilation + stride * (ow - 1) + 1: stride, :]
            for g in range(groups):
                out[..., g * cog:(g + 1) * cog] += rows[..., g * cig:(g + 1) * cig] @ wt[r, s, :, g * cog:(g + 1) * cog]
    return out


def reference(case: BenchCase, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """numpy float64 outputs of the canonical op."""
    p = case.params
    x = [np.asarray(a, dtype=np.float64) for a in inputs]
    if case.op in ("matmul", "batch_matmul"):
        return [x[0] @ x[1]]
    if case.op == "conv2d_nhwc":
        return [_conv_nhwc_f64(x[0], x[1], p["stride"], p["pad"], p["dilation"], p["groups"])]
    if case.op == "conv2d_bn_relu":
        conv = _conv_nhwc_f64(x[0], x[1], p["stride"], p["pad"], p["dilation"], p["groups"])
        return [np.maximum((conv + x[2]) * x[3] + x[4], 0.0)]
    if case.op == "transpose_batch_matmul":
        return [np.einsum("blhd,bmhd->bhlm", x[0], x[1])]
    if case.op == "depthwise_conv2d_nhwc":
        c = p["C"]
        return [_conv_nhwc_f64(x[0], x[1].reshape(p["K"], p["K"], 1, c), p["stride"], p["pad"], 1, c)]
    if case.op == "conv1d_nlc":
        return [_conv_nhwc_f64(x[0][:, None], x[1][None], p["stride"], p["pad"], 1, 1)[:, 0]]
    if case.op == "softmax":
        e = np.exp(x[0] - x[0].max(axis=-1, keepdims=True))
        return [e / e.sum(axis=-1, keepdims=True)]
    if case.op == "norm":
        return [np.sqrt((x[0] ** 2).sum(axis=(1, 2)))]
    raise ValueError(f"no reference for op {case.op!r}")


def relative_error(outputs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> float:
    """max |out - ref| / max |ref| over all outputs; inf on a shape mismatch, NaN stays NaN."""
    outputs = list(outputs)
    if len(outputs) != len(refs):
        return float("inf")
    worst = 0.0
    for out, ref in zip(outputs, refs):
        out = np.asarray(out, dtype=np.float64)
        if out.size != ref.size:
            return float("inf")
        out = out.reshape(ref.shape)
        scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
        err = float(np.max(np.abs(out - ref))) / scale if ref.size else 0.0
        if np.isnan(err) or not np.all(np.isfinite(out)):
            return float("nan")
        worst = max(worst, err)
    return worst


# ------------------------------------------------------------------------------------- the suites

# Transformer GEMMs, batch 1: GPT-2 small and BERT-base (d=768, 12 heads x 64, MLP 3072).
def transformer_gemm(short: bool = False) -> list[BenchCase]:
    cases: list[BenchCase] = []
    for seq in ((128,) if short else (128, 512)):
        mm = {
            f"gpt2-qkv-s{seq}": (seq, 768, 2304),  # fused QKV projection
            f"bert-q/k/v-s{seq}": (seq, 768, 768),  # BERT projects Q, K and V separately (x3 per layer)
            f"attn-out-s{seq}": (seq, 768, 768),
            f"mlp-up-s{seq}": (seq, 768, 3072),
            f"mlp-down-s{seq}": (seq, 3072, 768),
        }
        for name, (m, k, n) in mm.items():
            cases.append(BenchCase("transformer-gemm", name, "matmul", {"M": m, "K": k, "N": n},
                                   spec=f"matmul:{m},{k},{n}"))
        # tilegraph's batch_matmul spec is (B, N, M, K): a (B, N, K) @ b (B, K, M)
        cases.append(BenchCase("transformer-gemm", f"attn-scores-s{seq}", "batch_matmul",
                               {"B": 12, "M": seq, "K": 64, "N": seq}, spec=f"batch_matmul:12,{seq},{seq},64"))
        cases.append(BenchCase("transformer-gemm", f"attn-context-s{seq}", "batch_matmul",
                               {"B": 12, "M": seq, "K": seq, "N": 64}, spec=f"batch_matmul:12,{seq},64,{seq}"))
    if short:
        return [c for c in cases if c.name == "attn-scores-s128"]
    return cases


# The distinct convolutions of ResNet-50 v1.5 at 224x224, NHWC, (H, W, CI, CO, k, stride, pad).
# Bottleneck blocks: 1x1 reduce, 3x3, 1x1 expand; the first block of stages 2-4 has its stride 2 on
# the 3x3 and a 1x1/2 downsample shortcut; stage 1's shortcut is a 1x1/1 64->256.
RESNET50_CONVS: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "stem-7x7s2-3-64": (224, 224, 3, 64, 7, 2, 3),
    # stage 1, 56x56
    "s1-1x1-64-64": (56, 56, 64, 64, 1, 1, 0),
    "s1-3x3-64-64": (56, 56, 64, 64, 3, 1, 1),
    "s1-1x1-64-256": (56, 56, 64, 256, 1, 1, 0),  # expand, and the stride-1 shortcut
    "s1-1x1-256-64": (56, 56, 256, 64, 1, 1, 0),
    # stage 2, 28x28 (first block enters from 56x56)
    "s2-1x1-256-128": (56, 56, 256, 128, 1, 1, 0),
    "s2-3x3s2-128-128": (56, 56, 128, 128, 3, 2, 1),
    "s2-down-1x1s2-256-512": (56, 56, 256, 512, 1, 2, 0),
    "s2-3x3-128-128": (28, 28, 128, 128, 3, 1, 1),
    "s2-1x1-128-512": (28, 28, 128, 512, 1, 1, 0),
    "s2-1x1-512-128": (28, 28, 512, 128, 1, 1, 0),
    # stage 3, 14x14
    "s3-1x1-512-256": (28, 28, 512, 256, 1, 1, 0),
    "s3-3x3s2-256-256": (28, 28, 256, 256, 3, 2, 1),
    "s3-down-1x1s2-512-1024": (28, 28, 512, 1024, 1, 2, 0),
    "s3-3x3-256-256": (14, 14, 256, 256, 3, 1, 1),
    "s3-1x1-256-1024": (14, 14, 256, 1024, 1, 1, 0),
    "s3-1x1-1024-256": (14, 14, 1024, 256, 1, 1, 0),
    # stage 4, 7x7
    "s4-1x1-1024-512": (14, 14, 1024, 512, 1, 1, 0),
    "s4-3x3s2-512-512": (14, 14, 512, 512, 3, 2, 1),
    "s4-down-1x1s2-1024-2048": (14, 14, 1024, 2048, 1, 2, 0),
    "s4-3x3-512-512": (7, 7, 512, 512, 3, 1, 1),
    "s4-1x1-512-2048": (7, 7, 512, 2048, 1, 1, 0),
    "s4-1x1-2048-512": (7, 7, 2048, 512, 1, 1, 0),
}


def resnet50_conv(short: bool = False, batch: int = 1) -> list[BenchCase]:
    cases = []
    for name, (h, w, ci, co, k, s, p) in RESNET50_CONVS.items():
        if short and name != "s4-3x3-512-512":
            continue
        cases.append(BenchCase("resnet50-conv", name, "conv2d_nhwc", conv2d(batch, h, w, ci, co, k, s, p),
                               spec=f"conv2d_nhwc:{batch},{h},{w},{ci},{co},{k},{s},{p}", batch=batch))
    return cases


def ansor_cpu(batch: int = 1, short: bool = False) -> tuple[list[BenchCase], list[str]]:
    """Cases from tilegraph.workloads.list(); notes say what could not be resolved."""
    try:
        registry = importlib.import_module("tilegraph.workloads")
        ids = list(registry.list())
    except Exception as exc:  # noqa: BLE001 - the registry is optional: report it, do not fail
        return [], [f"ansor-cpu: tilegraph.workloads unavailable ({type(exc).__name__}: {exc}); suite skipped"]
    notes: list[str] = []
    cases = []
    for wid in ids:
        op, params = None, {}
        try:
            shapes = [tuple(t.shape) for t in registry.get(wid, batch).inputs]
            op, params = canonical_from_description(registry.describe(wid), batch, shapes)
        except Exception as exc:  # noqa: BLE001
            notes.append(f"{wid}: describe() failed ({exc}); peers skip it")
        cases.append(BenchCase("ansor-cpu", wid, op, params, workload_id=wid, batch=batch))
    if short:
        small = [c for c in cases if c.op == "batch_matmul"] or cases
        cases = sorted(small, key=lambda c: c.flops())[:1]
    return cases, notes


_OP_ALIASES = {
    "gmm": "batch_matmul", "batch_matmul": "batch_matmul", "matmul": "matmul",
    "conv2d_nhwc": "conv2d_nhwc", "depthwise_conv2d_nhwc": "depthwise_conv2d_nhwc", "conv1d_nlc": "conv1d_nlc",
    "conv3d_ndhwc": "conv3d_ndhwc", "conv2d_bn_relu": "conv2d_bn_relu", "transpose_batch_matmul": "transpose_batch_matmul",
    "softmax": "softmax", "norm_bmn": "norm", "norm": "norm",
}


def canonical_from_description(desc: dict[str, Any], batch: int,
                               shapes: Sequence[tuple[int, ...]] = ()) -> tuple[str | None, dict[str, int]]:
    """Map tilegraph.workloads.describe() output onto a canonical op, or (None, {}) when the peers lack it.

    tilegraph's fields: batch_matmul (B, N, M, K) = a (B, N, K) @ b (B, K, M); convs use "k" for the
    kernel size; softmax has no named fields, so its (rows, columns) come from the input `shapes`.
    """
    op = _OP_ALIASES.get(str(desc.get("op", "")).lower())
    raw = desc.get("params", {})
    if op is None or not isinstance(raw, dict):
        return None, {}
    p = {k: int(v) for k, v in raw.items() if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}
    try:
        if op == "batch_matmul":
            p = {"B": p["B"], "M": p["N"], "K": p["K"], "N": p["M"]}
        elif op in ("conv2d_nhwc", "conv2d_bn_relu"):
            p = {"N": p["N"], "H": p["H"], "W": p["W"], "CI": p["CI"], "CO": p["CO"], "KH": p["k"], "KW": p["k"],
                 "stride": p["stride"], "pad": p["pad"], "dilation": p.get("dilation", 1), "groups": p.get("groups", 1)}
        elif op == "depthwise_conv2d_nhwc":
            if p.get("dilation", 1) != 1:
                return None, {}
            p = {"N": p["N"], "H": p["H"], "W": p["W"], "C": p["C"], "K": p["k"], "stride": p["stride"], "pad": p["pad"]}
        elif op in ("conv1d_nlc", "conv3d_ndhwc"):
            if p.get("dilation", 1) != 1:
                return None, {}
            p = {**{k: v for k, v in p.items() if k != "k"}, "K": p["k"], "dilation": 1}
        elif op == "softmax":
            if len(shapes) != 1 or not shapes[0]:
                return None, {}
            p = {"M": int(np.prod(shapes[0][:-1])), "N": int(shapes[0][-1])}
        input_shapes(op, p)
    except KeyError:
        return None, {}
    return op, p


def build_suite(suite: str, batch: int = 1, short: bool = False) -> tuple[list[BenchCase], list[str]]:
    """(cases, notes) of a suite by name."""
    if suite == "transformer-gemm":
        return transformer_gemm(short), []
    if suite == "resnet50-conv":
        return resnet50_conv(short, batch), []
    if suite == "ansor-cpu":
        return ansor_cpu(batch, short)
    raise ValueError(f"argument suite: unknown suite {suite!r}; known: {', '.join(SUITES)}")
