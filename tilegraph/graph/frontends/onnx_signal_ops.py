"""ONNX signal operators (registered into onnx_ops.CONVERTERS).

    HannWindow(size)          a constant: sin^2(pi n / N)          (N = size, or size - 1 if symmetric)
    HammingWindow(size)       25/46 - 21/46 cos(2 pi n / N)
    BlackmanWindow(size)      0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
    MelWeightMatrix(...)      a constant triangle filter bank [dft_length // 2 + 1, num_mel_bins]
    DFT(x)                    a matmul with a constant DFT matrix: [re, im] @ [[C, S], [-S, C]]
    STFT(x)                   frames gathered, windowed, then DFT

The windows and the mel matrix are functions of their (shape-deciding) scalar inputs, so they are
constants once those are known. A DFT as a dense matmul is O(n^2) per signal: exact to rounding
and fast for the frame sizes models use (a few hundred to a few thousand points).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _out, converts, dtype_of
from tilegraph.graph.ir import is_float

MAX_DFT_POINTS = 1 << 14  # the dense DFT matrix is (2n)^2 values: 16k points is 4 GiB in float32


def _scalar_int(e: Emitter, name: str, what: str) -> int:
    value = np.asarray(e.value(name, what)).reshape(-1)
    if value.size != 1:
        raise GraphError(f"{what} must hold one value, got {value.size}")
    return int(value[0])


@converts("HannWindow", "HammingWindow", "BlackmanWindow")
def _window(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    size = _scalar_int(e, ins[0], f"node {node.name!r} ({node.op_type}) size")
    if size < 1:
        raise GraphError(f"node {node.name!r} ({node.op_type}): size {size} < 1")
    n = np.arange(size, dtype=np.float64)
    span = size if int(attrs.get("periodic", 1)) else size - 1
    phase = 2 * np.pi * n / span if span else np.zeros(size)
    if node.op_type == "HannWindow":
        window = np.sin(phase / 2) ** 2
    elif node.op_type == "HammingWindow":
        window = 25 / 46 - (21 / 46) * np.cos(phase)
    else:
        window = 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase)
    dtype = dtype_of(int(attrs.get("output_datatype", 1)), f"node {node.name!r} ({node.op_type}) output_datatype")
    return [e.constant(window.astype(dtype), _out(node))]


@converts("MelWeightMatrix")
def _mel_weight_matrix(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Triangles over mel-spaced frequency bins (HTK's mel scale, 2595 log10(1 + f / 700))."""
    what = f"node {node.name!r} (MelWeightMatrix)"
    bins, dft_length, rate = (_scalar_int(e, i, f"{what} {w}") for i, w in
                              zip(ins[:3], ("num_mel_bins", "dft_length", "sample_rate")))
    low, high = (float(np.asarray(e.value(i, f"{what} {w}")).reshape(-1)[0]) for i, w in
                 zip(ins[3:5], ("lower_edge_hertz", "upper_edge_hertz")))
    if bins < 1 or dft_length < 1 or rate < 1:
        raise GraphError(f"{what}: num_mel_bins, dft_length and sample_rate must be positive")
    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731
    mels = to_mel(low) + np.arange(bins + 2) * (to_mel(high) - to_mel(low)) / (bins + 2)
    hertz = 700 * (10 ** (mels / 2595) - 1)
    edges = np.floor((dft_length + 1) * hertz / rate).astype(np.int64)
    spectrum = dft_length // 2 + 1
    if edges.min() < 0 or edges.max() >= spectrum:
        raise GraphError(f"{what}: the band edges fall outside the {spectrum} spectrum bins")
    matrix = np.zeros((spectrum, bins))
    for i in range(bins):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        if centre == left:
            matrix[centre, i] = 1
        else:
            j = np.arange(left, centre + 1)
            matrix[j, i] = (j - left) / (centre - left)
        if right > centre:
            j = np.arange(centre, right)
            matrix[j, i] = (right - j) / (right - centre)
    dtype = dtype_of(int(attrs.get("output_datatype", 1)), f"{what} output_datatype")
    return [e.constant(matrix.astype(dtype), _out(node))]


def _move_last(e: Emitter, x: str, axis: int, name: str) -> tuple[str, tuple[int, ...]]:
    """`x` with `axis` moved last, and the permutation that puts it back."""
    rank = len(e.type_of(x).shape)
    perm = [d for d in range(rank) if d != axis] + [axis]
    if perm == list(range(rank)):
        return x, tuple(perm)
    return e.emit("transpose", [x], {"perm": tuple(perm)}, f"{name}_last"), tuple(int(p) for p in np.argsort(perm))


def _fit_last(e: Emitter, x: str, length: int, name: str) -> str:
    """`x` cut or zero-padded to `length` along its last axis."""
    shape = e.type_of(x).shape
    n = shape[-1]
    if n > length:
        rank = len(shape)
        return e.emit("slice", [x], {"begin": (0,) * rank, "end": (*shape[:-1], length), "steps": (1,) * rank},
                      f"{name}_cut")
    if n < length:
        before = (0,) * len(shape)
        return e.emit("pad", [x], {"before": before, "after": (*before[:-1], length - n), "value": 0.0},
                      f"{name}_pad")
    return x


def dft(e: Emitter, x: str, axis: int, length: int | None, inverse: bool, onesided: bool, name: str,
        out: str = "") -> str:
    """ONNX's DFT of `x` ([..., n at `axis`, ..., 1 or 2]) as a matmul with a constant matrix."""
    shape = e.type_of(x).shape
    dtype = e.type_of(x).dtype
    rank = len(shape)
    if not is_float(dtype) or shape[-1] not in (1, 2) or not 0 <= axis < rank - 1:
        raise GraphError(f"node {name!r} (DFT): needs a float signal [..., n, ..., 1 or 2] and an axis before the "
                         f"last, got {e.type_of(x)} and axis {axis}")
    n_in = shape[axis]
    irfft = inverse and onesided
    length = length if length is not None else (2 * (n_in - 1) if irfft else n_in)
    if not 1 <= length <= MAX_DFT_POINTS:
        raise GraphError(f"node {name!r} (DFT): length {length} is outside 1..{MAX_DFT_POINTS} (a dense DFT matrix)")
    taken = length // 2 + 1 if irfft else length  # the input points the transform reads
    parts = []
    for index in range(shape[-1]):
        part = e.emit("slice", [x], {"begin": (0,) * (rank - 1) + (index,), "end": shape[:-1] + (index + 1,),
                                     "steps": (1,) * rank}, f"{name}_part{index}") if shape[-1] == 2 else x
        part = e.emit("reshape", [part], {"shape": shape[:-1]}, f"{name}_part{index}_flat")
        moved, back = _move_last(e, part, axis, f"{name}_part{index}")
        parts.append(_fit_last(e, moved, taken, f"{name}_part{index}"))
    rows = parts[0] if len(parts) == 1 else e.emit("concat", parts, {"axis": -1}, f"{name}_re_im")
    n = np.arange(taken)[:, None]
    if irfft:
        k = np.arange(length)[None, :]
        weight = np.full(taken, 2.0)
        weight[0] = 1.0
        if length % 2 == 0:
            weight[-1] = 1.0
        angle = 2 * np.pi * n * k / length
        cos, sin = weight[:, None] * np.cos(angle) / length, weight[:, None] * np.sin(angle) / length
        blocks = [cos, -sin]
        outputs = 1
    else:
        count = length // 2 + 1 if onesided and not inverse else length
        angle = (2 if inverse else -2) * np.pi * n * np.arange(count)[None, :] / length
        cos, sin = np.cos(angle), np.sin(angle)
        if inverse:
            cos, sin = cos / length, sin / length
        # [re, im] @ [[cos, sin], [-sin, cos]] = [re cos - im sin, re sin + im cos]
        blocks = [np.concatenate([cos, sin], axis=1), np.concatenate([-sin, cos], axis=1)]
        outputs = 2
    matrix = np.concatenate(blocks[:len(parts)], axis=0).astype(dtype)
    lead = e.type_of(rows).shape[:-1]
    batch = int(np.prod(lead, dtype=np.int64))
    flat = e.emit("reshape", [rows], {"shape": (batch, matrix.shape[0])}, f"{name}_rows")
    y = e.emit("matmul", [flat, e.constant(matrix, f"{name}_matrix")], name=f"{name}_matmul")
    count = matrix.shape[1] // outputs
    y = e.emit("reshape", [y], {"shape": (*lead, outputs, count)}, f"{name}_split")
    moved_rank = len(lead) + 2  # [rest..., re/im, k] -> [rest..., k, re/im] -> k back at `axis`
    perm = list(range(len(lead))) + [moved_rank - 1, moved_rank - 2]
    y = e.emit("transpose", [y], {"perm": tuple(perm)}, f"{name}_complex_last")
    final = list(back) + [rank - 1]
    return e.emit("transpose", [y], {"perm": tuple(final)}, name, [out] if out else None)


@converts("DFT")
def _dft(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    x = ins[0]
    rank = len(e.type_of(x).shape)
    length = _scalar_int(e, ins[1], f"node {node.name!r} (DFT) dft_length") if len(ins) > 1 and ins[1] else None
    if opset >= 20:
        axis = _scalar_int(e, ins[2], f"node {node.name!r} (DFT) axis") if len(ins) > 2 and ins[2] else -2
    else:
        axis = int(attrs.get("axis", 1))
    if not -rank <= axis < rank:
        raise GraphError(f"node {node.name!r} (DFT): axis {axis} is out of range for rank {rank}")
    axis %= rank
    return [dft(e, x, axis, length, bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0)), node.name,
                _out(node))]


@converts("STFT")
def _stft(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    """Frames [batch, frames, frame_length, 1 or 2] gathered from the signal, windowed, DFT'd."""
    x, name = ins[0], node.name
    shape = e.type_of(x).shape
    if len(shape) != 3:
        raise GraphError(f"node {name!r} (STFT): the signal must be [batch, length, 1 or 2], got {e.type_of(x)}")
    step = _scalar_int(e, ins[1], f"node {name!r} (STFT) frame_step")
    window = ins[2] if len(ins) > 2 and ins[2] else ""
    if len(ins) > 3 and ins[3]:
        frame = _scalar_int(e, ins[3], f"node {name!r} (STFT) frame_length")
    elif window:
        frame = e.type_of(window).shape[0]
    else:
        raise GraphError(f"node {name!r} (STFT): needs a window or a frame_length")
    if step < 1 or not 1 <= frame <= shape[1]:
        raise GraphError(f"node {name!r} (STFT): frame_step {step} and frame_length {frame} do not fit "
                         f"a signal of {shape[1]}")
    frames = 1 + (shape[1] - frame) // step
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = e.emit("gather", [x, e.constant(index.astype(np.int64), f"{name}_index")], {"axis": 1},
                    f"{name}_frames")
    if window:
        w = e.emit("reshape", [window], {"shape": (frame, 1)}, f"{name}_window")
        framed = e.emit("mul", [framed, w], name=f"{name}_windowed")
    return [dft(e, framed, 2, frame, False, bool(attrs.get("onesided", 1)), name, _out(node))]
