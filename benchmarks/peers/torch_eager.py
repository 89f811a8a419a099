"""PyTorch eager (oneDNN/MKL) on the canonical layouts; what is timed, exactly:

    matmul / batch_matmul    torch.matmul(a, b) on contiguous float32 tensors
    conv2d_nhwc / depthwise  F.conv2d(x, w, stride, padding, dilation, groups) where x is the NHWC input
                             seen as NCHW through permute(0, 3, 1, 2), i.e. a channels_last tensor (no copy),
                             and w is the weight repacked once, outside the timed call, to OIHW
                             channels_last; the output (channels_last) is read back as NHWC by a free permute
    conv2d_bn_relu           the conv above, then relu((conv + bias) * bn_scale + bn_offset) in eager ops
    conv3d_ndhwc             F.conv3d on the NDHWC input seen as NCDHW (channels_last_3d), weight repacked once
    transpose_batch_matmul   torch.matmul(q.permute(0, 2, 1, 3), v.permute(0, 2, 3, 1)) (B, heads, seq, seq)
    conv1d_nlc               F.conv1d on the NLC input seen as NCL through permute (torch may copy: timed)
    softmax                  torch.softmax(x, dim=-1)
    norm                     torch.linalg.vector_norm(x, dim=(1, 2))

Input conversion to torch tensors (torch.from_numpy, zero-copy) happens before timing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.peers import PeerSkip, Prepared


def torch_program(case: Any, inputs: Sequence[np.ndarray]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(fn, args): fn(*args) computes the op in torch; args are prepared (layouts, weight packing)."""
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own convention

    p = case.params
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    if case.op in ("matmul", "batch_matmul"):
        return torch.matmul, (t[0], t[1])
    if case.op in ("conv2d_nhwc", "depthwise_conv2d_nhwc", "conv2d_bn_relu"):
        x = t[0].permute(0, 3, 1, 2)  # NHWC memory seen as NCHW: exactly torch.channels_last
        w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # HWIO -> OIHW
        if case.op == "conv2d_bn_relu":
            stride, pad, dil, groups = p["stride"], p["pad"], p["dilation"], p["groups"]

            def cbr(xx: Any, ww: Any, bias: Any, scale: Any, offset: Any) -> Any:
                conv = F.conv2d(xx, ww, stride=stride, padding=pad, dilation=dil, groups=groups).permute(0, 2, 3, 1)
                return torch.relu((conv + bias) * scale + offset)

            return cbr, (x, w, t[2], t[3], t[4])
        if case.op == "conv2d_nhwc":
            stride, pad, dil, groups = p["stride"], p["pad"], p["dilation"], p["groups"]
        else:
            w = t[1].reshape(p["K"], p["K"], 1, p["C"]).permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
            stride, pad, dil, groups = p["stride"], p["pad"], 1, p["C"]

        def conv(xx: Any, ww: Any) -> Any:
            return F.conv2d(xx, ww, stride=stride, padding=pad, dilation=dil, groups=groups).permute(0, 2, 3, 1)

        return conv, (x, w)
    if case.op == "conv3d_ndhwc":
        x = t[0].permute(0, 4, 1, 2, 3)
        w = t[1].permute(4, 3, 0, 1, 2).contiguous(memory_format=torch.channels_last_3d)
        stride, pad = p["stride"], p["pad"]
        return (lambda xx, ww: F.conv3d(xx, ww, stride=stride, padding=pad).permute(0, 2, 3, 4, 1)), (x, w)
    if case.op == "transpose_batch_matmul":
        return (lambda q, v: torch.matmul(q.permute(0, 2, 1, 3), v.permute(0, 2, 3, 1))), (t[0], t[1])
    if case.op == "conv1d_nlc":
        x = t[0].permute(0, 2, 1)
        w = t[1].permute(2, 1, 0).contiguous()  # (K, CI, CO) -> (CO, CI, K)
        stride, pad = p["stride"], p["pad"]
        return (lambda xx, ww: F.conv1d(xx, ww, stride=stride, padding=pad).permute(0, 2, 1)), (x, w)
    if case.op == "softmax":
        return (lambda xx: torch.softmax(xx, dim=-1)), (t[0],)
    if case.op == "norm":
        return (lambda xx: torch.linalg.vector_norm(xx, dim=(1, 2))), (t[0],)
    raise PeerSkip(f"op {case.op or case.name!r} is not expressed in the torch peer")


def to_numpy(out: Any) -> list[np.ndarray]:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().contiguous().numpy() for o in outs]


class TorchEager:
    name = "torch"

    def unavailable(self) -> str | None:
        try:
            import torch
        except ImportError as exc:
            return f"torch not installed ({exc}); install the CPU wheel: pip install torch==2.13.0"
        return None if torch.__version__ else "torch without a version"

    def set_threads(self, n: int) -> None:
        import torch

        torch.set_num_threads(n)

    def prepare(self, case: Any, inputs: Sequence[np.ndarray]) -> Prepared:
        import torch

        fn, args = torch_program(case, inputs)

        def call() -> Any:
            with torch.inference_mode():
                return fn(*args)

        return Prepared(call=call, outputs=lambda: to_numpy(call()), note="")


def make() -> TorchEager:
    return TorchEager()
