"""The workload registry: the Ansor single-op/subgraph suite by id, and `op:shape` specs.

    get("GMM-4")                 the 4th shape of the GMM family (1-based), batch 1
    get("C2D-1", batch=16)       the leading batch extent 1 replaced by 16
    get("C3D-1", reduced=True)   a small workload of the same op, for quick checks
    from_spec("matmul:512,256,384")   A (512, 256) @ B (256, 384); also accepts suite ids
    list(), describe("NRM-2")

Families and tuple formats follow TVM's te_workload CONFIGS (tvm/python/tvm/auto_scheduler/testing):
C1D conv1d_nlc, C2D conv2d_nhwc, C3D conv3d_ndhwc, GMM batch_matmul, GRP grouped conv2d_nhwc,
DIL dilated conv2d_nhwc, DEP depthwise_conv2d_nhwc, T2D conv2d_transpose_nhwc, CAP
conv2d_capsule_nhwijc, NRM norm_bmn, SFM softmax, CBR conv2d_bn_relu, TBG transpose_batch_matmul.

Reduction rule (reduced=True): kernel size, stride, padding, dilation, groups and capsule size are
kept; spatial extents (length, depth, height, width) become min(extent, 8); channels become
min(channels, 8); matrix extents (GMM's N/M/K, NRM/SFM rows and columns, TBG sequence and head
dim) become min(extent, 16); TBG heads become min(heads, 2). The batch stays as given.

Every workload built here has `reference_spec` = {"op": ..., "params": {...}} (plain data, picklable);
its float64 reference comes from tilegraph.testing.reference_outputs.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tilegraph import ops
from tilegraph.errors import WorkloadError
from tilegraph.te import placeholder
from tilegraph.te.dims import dim
from tilegraph.te.tensor import Tensor
from tilegraph.te.workload import Workload

# ---------------------------------------------------------------------------------------------
# Spec builders: op name -> field names (a trailing "?" marks an optional field) and a builder.


def _ph(shape: Sequence[int], name: str) -> Tensor:
    return placeholder(tuple(shape), "float32", name)


def _conv1d(N, L, CI, CO, k, s, p, dil=1):  # noqa: ANN001, ANN202, N803
    x, w = _ph((N, L, CI), "x"), _ph((k, CI, CO), "w")
    return [x, w], ops.conv1d_nlc(x, w, s, p, dil)


def _conv2d(N, H, W, CI, CO, k, s, p, dil=1, groups=1):  # noqa: ANN001, ANN202, N803
    if groups < 1 or CI % groups:
        raise ValueError(f"groups={groups} must divide CI={CI}")
    x, w = _ph((N, H, W, CI), "x"), _ph((k, k, CI // groups, CO), "w")
    return [x, w], ops.conv2d_nhwc(x, w, s, p, dil, groups)


def _conv3d(N, D, H, W, CI, CO, k, s, p, dil=1):  # noqa: ANN001, ANN202, N803
    x, w = _ph((N, D, H, W, CI), "x"), _ph((k, k, k, CI, CO), "w")
    return [x, w], ops.conv3d_ndhwc(x, w, s, p, dil)


def _conv2d_nchw(N, C, H, W, CO, k, s, p, dil=1):  # noqa: ANN001, ANN202, N803
    x, w = _ph((N, C, H, W), "x"), _ph((CO, C, k, k), "w")
    return [x, w], ops.conv2d_nchw(x, w, s, p, dil)


def _depthwise(N, H, W, C, k, s, p, dil=1):  # noqa: ANN001, ANN202, N803
    x, w = _ph((N, H, W, C), "x"), _ph((k, k, C, 1), "w")
    return [x, w], ops.depthwise_conv2d_nhwc(x, w, s, p, dil)


def _transposed(N, H, W, CI, CO, k, s, p):  # noqa: ANN001, ANN202, N803
    x, w = _ph((N, H, W, CI), "x"), _ph((k, k, CI, CO), "w")
    return [x, w], ops.conv2d_transpose_nhwc(x, w, s, p)


def _capsule(N, H, W, CI, CO, k, s, p):  # noqa: ANN001, ANN202, N803
    cap = 4
    x, w = _ph((N, H, W, cap, cap, CI), "x"), _ph((k, k, cap, cap, CI, CO), "w")
    return [x, w], ops.conv2d_capsule_nhwijc(x, w, s, p, cap)


def _cbr(N, H, W, CI, CO, k, s, p, dil=1):  # noqa: ANN001, ANN202, N803
    x, w = _ph((N, H, W, CI), "x"), _ph((k, k, CI, CO), "w")
    bias, scale, offset = _ph((CO,), "bias"), _ph((CO,), "bn_scale"), _ph((CO,), "bn_offset")
    return [x, w, bias, scale, offset], ops.conv2d_bn_relu(x, w, bias, scale, offset, s, p, dil)


def _tbg(B, L, H, D):  # noqa: ANN001, ANN202, N803
    q, v = _ph((B, L, H, D), "query"), _ph((B, L, H, D), "value")
    return [q, v], ops.transpose_batch_matmul(q, v)


def _matmul(M, K, N):  # noqa: ANN001, ANN202, N803
    a, b = _ph((M, K), "a"), _ph((K, N), "b")
    return [a, b], ops.matmul(a, b)


def _dense(M, K, N):  # noqa: ANN001, ANN202, N803
    x, w = _ph((M, K), "x"), _ph((N, K), "w")
    return [x, w], ops.dense(x, w)


def _batch_matmul(B, N, M, K):  # noqa: ANN001, ANN202, N803
    a, b = _ph((B, N, K), "a"), _ph((B, K, M), "b")
    return [a, b], ops.batch_matmul(a, b)


def _norm_bmn(B, M, N):  # noqa: ANN001, ANN202, N803
    x = _ph((B, M, N), "x")
    return [x], ops.norm_bmn(x)


def _pool(op: Callable[..., Tensor]) -> Callable[..., tuple]:
    def build(N, H, W, C, k, s, p):  # noqa: ANN001, ANN202, N803
        x = _ph((N, H, W, C), "x")
        return [x], op(x, k, s, p)

    return build


def _global_pool(N, H, W, C):  # noqa: ANN001, ANN202, N803
    x = _ph((N, H, W, C), "x")
    return [x], ops.global_avg_pool2d(x)


def _batch_norm(N, C, H, W):  # noqa: ANN001, ANN202, N803
    x = _ph((N, C, H, W), "x")
    stats = [_ph((C,), n) for n in ("mean", "var", "gamma", "beta")]
    return [x, *stats], ops.batch_norm(x, *stats)


def _unary(op: Callable[..., Tensor]) -> Callable[..., tuple]:
    def build(*dims: int) -> tuple:
        x = _ph(dims, "x")
        return [x], op(x)

    return build


def _binary(op: Callable[..., Tensor]) -> Callable[..., tuple]:
    def build(*dims: int) -> tuple:
        a, b = _ph(dims, "a"), _ph(dims, "b")
        return [a, b], op(a, b)

    return build


def _layer_norm(*dims: int) -> tuple:
    x, gamma, beta = _ph(dims, "x"), _ph(dims[-1:], "gamma"), _ph(dims[-1:], "beta")
    return [x, gamma, beta], ops.layer_norm(x, gamma, beta)


def _last_axis(op: Callable[..., Tensor]) -> Callable[..., tuple]:
    def build(*dims: int) -> tuple:
        x = _ph(dims, "x")
        return [x], op(x, axis=-1)

    return build


@dataclass(frozen=True)
class _SpecOp:
    fields: tuple[str, ...]  # "..." alone means: any number (>= 1) of dimensions
    build: Callable[..., tuple]
    example: str

    @property
    def variadic(self) -> bool:
        return self.fields == ("...",)


_CONV2D_FIELDS = ("N", "H", "W", "CI", "CO", "k", "stride", "pad")
_SPEC_OPS: dict[str, _SpecOp] = {
    "matmul": _SpecOp(("M", "K", "N"), _matmul, "matmul:512,256,384"),
    "dense": _SpecOp(("M", "K", "N"), _dense, "dense:128,768,3072"),
    "batch_matmul": _SpecOp(("B", "N", "M", "K"), _batch_matmul, "batch_matmul:1,128,128,128"),
    "conv1d_nlc": _SpecOp(("N", "L", "CI", "CO", "k", "stride", "pad", "dilation?"), _conv1d,
                          "conv1d_nlc:1,256,64,128,3,2,1"),
    "conv2d_nhwc": _SpecOp((*_CONV2D_FIELDS, "dilation?", "groups?"), _conv2d, "conv2d_nhwc:1,56,56,64,64,3,1,1"),
    "conv3d_ndhwc": _SpecOp(("N", "D", "H", "W", "CI", "CO", "k", "stride", "pad", "dilation?"), _conv3d,
                            "conv3d_ndhwc:1,16,56,56,64,64,1,1,0"),
    "conv2d_nchw": _SpecOp(("N", "C", "H", "W", "CO", "k", "stride", "pad", "dilation?"), _conv2d_nchw,
                           "conv2d_nchw:1,64,56,56,64,3,1,1"),
    "depthwise_conv2d_nhwc": _SpecOp(("N", "H", "W", "C", "k", "stride", "pad", "dilation?"), _depthwise,
                                     "depthwise_conv2d_nhwc:1,112,112,32,3,1,1"),
    "conv2d_transpose_nhwc": _SpecOp(_CONV2D_FIELDS, _transposed, "conv2d_transpose_nhwc:1,4,4,512,256,4,2,1"),
    "conv2d_capsule_nhwijc": _SpecOp(_CONV2D_FIELDS, _capsule, "conv2d_capsule_nhwijc:1,16,16,32,32,3,2,1"),
    "conv2d_bn_relu": _SpecOp((*_CONV2D_FIELDS, "dilation?"), _cbr, "conv2d_bn_relu:1,56,56,64,128,3,2,1"),
    "transpose_batch_matmul": _SpecOp(("B", "seq", "heads", "dim"), _tbg, "transpose_batch_matmul:1,128,12,64"),
    "norm_bmn": _SpecOp(("B", "M", "N"), _norm_bmn, "norm_bmn:1,256,256"),
    "max_pool2d": _SpecOp(("N", "H", "W", "C", "k", "stride", "pad"), _pool(ops.max_pool2d),
                          "max_pool2d:1,56,56,64,3,2,1"),
    "avg_pool2d": _SpecOp(("N", "H", "W", "C", "k", "stride", "pad"), _pool(ops.avg_pool2d),
                          "avg_pool2d:1,56,56,64,3,2,1"),
    "global_avg_pool2d": _SpecOp(("N", "H", "W", "C"), _global_pool, "global_avg_pool2d:1,7,7,2048"),
    "batch_norm": _SpecOp(("N", "C", "H", "W"), _batch_norm, "batch_norm:1,64,56,56"),
    "layer_norm": _SpecOp(("...",), _layer_norm, "layer_norm:128,768"),
    "softmax": _SpecOp(("...",), _last_axis(ops.softmax), "softmax:256,1000"),
    **{name: _SpecOp(("...",), _unary(getattr(ops, name)), f"{name}:128,768")
       for name in ("relu", "gelu", "sigmoid", "tanh", "exp", "transpose")},
    **{name: _SpecOp(("...",), _binary(getattr(ops, name)), f"{name}:128,768")
       for name in ("add", "sub", "mul", "div", "maximum", "minimum")},
    **{name: _SpecOp(("...",), _last_axis(getattr(ops, name)), f"{name}:128,768")
       for name in ("sum", "mean", "max", "min")},
}


# ---------------------------------------------------------------------------------------------
# The suite


@dataclass(frozen=True)
class _Family:
    op: str
    kinds: str  # per field: b batch, s spatial, c channel, m matrix extent, h heads, k kept as is
    shapes: tuple[tuple[int, ...], ...]


_SUITE: dict[str, _Family] = {
    "C1D": _Family("conv1d_nlc", "bscckkk",
                   ((1, 256, 64, 128, 3, 2, 1), (1, 128, 128, 256, 1, 2, 0), (1, 64, 256, 256, 5, 1, 2),
                    (1, 32, 512, 512, 3, 1, 1))),
    "C2D": _Family("conv2d_nhwc", "bsscckkk",
                   ((1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 64, 1, 1, 0), (1, 14, 14, 256, 256, 3, 1, 1),
                    (1, 7, 7, 512, 512, 3, 1, 1))),
    "C3D": _Family("conv3d_ndhwc", "bssscckkk",
                   ((1, 16, 224, 224, 3, 64, 7, 2, 3), (1, 16, 56, 56, 64, 64, 1, 1, 0),
                    (1, 16, 14, 14, 256, 256, 3, 1, 1), (1, 16, 7, 7, 512, 512, 3, 1, 1))),
    "GMM": _Family("batch_matmul", "bmmm",
                   ((1, 128, 128, 128), (1, 512, 32, 512), (1, 512, 512, 512), (1, 1024, 1024, 1024))),
    "GRP": _Family("conv2d_nhwc", "bsscckkkkk",
                   ((1, 56, 56, 64, 128, 3, 2, 1, 1, 4), (1, 56, 56, 64, 64, 1, 1, 0, 1, 4),
                    (1, 14, 14, 256, 256, 3, 1, 1, 1, 4), (1, 7, 7, 512, 512, 3, 1, 1, 1, 4))),
    "DIL": _Family("conv2d_nhwc", "bsscckkkk",
                   ((1, 224, 224, 3, 64, 7, 2, 3, 2), (1, 56, 56, 64, 64, 1, 1, 0, 2), (1, 14, 14, 256, 256, 3, 1, 1, 2),
                    (1, 7, 7, 512, 512, 3, 1, 1, 2))),
    "DEP": _Family("depthwise_conv2d_nhwc", "bssckkk",
                   ((1, 112, 112, 32, 3, 1, 1), (1, 112, 112, 64, 3, 2, 1), (1, 14, 14, 512, 3, 2, 1),
                    (1, 7, 7, 1024, 3, 1, 1))),
    "T2D": _Family("conv2d_transpose_nhwc", "bsscckkk",
                   ((1, 4, 4, 512, 256, 4, 2, 1), (1, 8, 8, 256, 128, 4, 2, 1), (1, 16, 16, 128, 64, 4, 2, 1),
                    (1, 32, 32, 64, 3, 4, 2, 1))),
    "CAP": _Family("conv2d_capsule_nhwijc", "bsscckkk",
                   ((1, 16, 16, 32, 32, 3, 2, 1), (1, 8, 8, 32, 32, 3, 1, 1), (1, 16, 16, 8, 16, 3, 2, 1),
                    (1, 8, 8, 16, 16, 3, 1, 1))),
    "NRM": _Family("norm_bmn", "bmm", ((1, 256, 256), (1, 512, 512), (1, 1024, 1024), (1, 4096, 1024))),
    "SFM": _Family("softmax", "bmm", ((1, 256, 256), (1, 512, 512), (1, 1024, 1024), (1, 4096, 1024))),
    "CBR": _Family("conv2d_bn_relu", "bsscckkk",
                   ((1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 128, 3, 2, 1), (1, 28, 28, 128, 256, 1, 2, 0),
                    (1, 7, 7, 512, 512, 3, 1, 1))),
    "TBG": _Family("transpose_batch_matmul", "bmhm",
                   ((1, 128, 12, 64), (1, 128, 16, 64), (1, 64, 12, 128), (1, 128, 12, 128))),
}

_REDUCED_CAP = {"s": 8, "c": 8, "m": 16, "h": 2}
_ID = re.compile(r"^([A-Za-z0-9]+)-(\d+)$")


def spec_examples() -> dict[str, str]:
    """Every op `from_spec` builds, with an example spec ("matmul" -> "matmul:512,256,384")."""
    return {op: entry.example for op, entry in _SPEC_OPS.items()}


def list() -> builtins.list[str]:  # noqa: A001 (the registry's public name)
    """Every suite id, family by family: C1D-1 .. TBG-4."""
    return [f"{family}-{i + 1}" for family, fam in _SUITE.items() for i in range(len(fam.shapes))]


def _resolve(workload_id: str) -> tuple[str, _Family, tuple[int, ...]]:
    match = _ID.match(workload_id.strip()) if isinstance(workload_id, str) else None
    family = _SUITE.get(match.group(1).upper()) if match else None
    if match is None or family is None or not 1 <= int(match.group(2)) <= len(family.shapes):
        raise WorkloadError(f"unknown workload id {workload_id!r}; valid ids are {', '.join(list())}")
    return match.group(1).upper(), family, family.shapes[int(match.group(2)) - 1]


def _suite_values(family: _Family, shape: tuple[int, ...], batch: int, reduced: bool) -> tuple[int, ...]:
    out = []
    for kind, value in zip(family.kinds, shape):
        if kind == "b":
            out.append(batch)
        elif reduced and kind in _REDUCED_CAP:
            out.append(min(value, _REDUCED_CAP[kind]))
        else:
            out.append(value)
    return tuple(out)


def _check_batch(batch: int) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise WorkloadError(f"batch must be a positive int, got {batch!r}")


def describe(workload_id: str, batch: int = 1, reduced: bool = False) -> dict[str, object]:
    """{"op": op name, "params": {field: value}} of a suite id."""
    _check_batch(batch)
    _, family, shape = _resolve(workload_id)
    spec = _SPEC_OPS[family.op]
    values = _suite_values(family, shape, batch, reduced)
    names = [f.rstrip("?") for f in spec.fields]
    return {"op": family.op, "params": dict(zip(names, values))}


def get(workload_id: str, batch: int = 1, reduced: bool = False) -> Workload:
    """The suite workload `workload_id` (e.g. "GMM-4") with leading batch extent `batch`."""
    _check_batch(batch)
    name, family, shape = _resolve(workload_id)
    wl = _build(family.op, _suite_values(family, shape, batch, reduced))
    wl.suite_id = f"{name}-{family.shapes.index(shape) + 1}"  # type: ignore[attr-defined]
    return wl


def _build(op: str, values: tuple[int, ...]) -> Workload:
    spec = _SPEC_OPS[op]
    try:
        inputs, output = spec.build(*values)
    except (ValueError, TypeError) as err:
        raise WorkloadError(f"{op}:{','.join(map(str, values))} is not a valid {op}: {err}") from None
    wl = Workload(inputs, [output])
    if spec.variadic:
        params: dict[str, object] = {"shape": values}
    else:
        params = dict(zip((f.rstrip("?") for f in spec.fields), values))
    wl.reference_spec = {"op": op, "params": params}  # type: ignore[attr-defined]
    return wl


def from_spec(spec: str) -> Workload:
    """A workload from "op:comma,separated,ints" (e.g. "matmul:512,256,384") or a suite id."""
    if not isinstance(spec, str):
        raise WorkloadError(f"a workload spec must be a string like 'matmul:512,256,384', got {type(spec).__name__}")
    text = spec.strip()
    if ":" not in text:
        if _ID.match(text):
            return get(text)
        raise WorkloadError(f"cannot read workload spec {spec!r}: expected 'op:ints' (e.g. 'matmul:512,256,384') "
                            "or a suite id (e.g. 'GMM-4')")
    op, _, shape_text = text.partition(":")
    op = op.strip()
    if op not in _SPEC_OPS:
        raise WorkloadError(f"unknown op {op!r} in workload spec {spec!r}; known ops: {', '.join(sorted(_SPEC_OPS))}")
    entry = _SPEC_OPS[op]
    texts = [v.strip() for v in shape_text.split(",")]
    if any(".." in v for v in texts):
        return _build_with_dims(op, entry, texts, spec)
    try:
        values = tuple(int(v) for v in texts)
    except ValueError:
        raise WorkloadError(f"workload spec {spec!r} must list integers after ':', e.g. {entry.example!r}") from None
    if any(v < 0 for v in values):
        raise WorkloadError(f"workload spec {spec!r} has a negative value; e.g. {entry.example!r}")
    if not entry.variadic:
        required = sum(not f.endswith("?") for f in entry.fields)
        if not required <= len(values) <= len(entry.fields):
            fields = ",".join(entry.fields)
            raise WorkloadError(f"workload spec {spec!r} needs {required} to {len(entry.fields)} integers "
                                f"({fields}); e.g. {entry.example!r}")
    return _build(op, values)


def _build_with_dims(op: str, entry: _SpecOp, texts: list[str], spec: str) -> Workload:
    """A spec whose extents may be run-time dims, "LO..HI" (te/dims.py): "matmul:1..512,768,768"
    has M in [1, 512], a dim named after its field (M), or d<position> for ops of any rank."""
    names = [f"d{i}" for i in range(len(texts))] if entry.variadic else [f.rstrip("?") for f in entry.fields]
    if len(texts) > len(names):
        raise WorkloadError(f"workload spec {spec!r} has {len(texts)} extents; {op} takes at most {len(names)}")
    values: list[object] = []
    for name, text in zip(names, texts):
        lo, sep, hi = text.partition("..")
        try:
            values.append(dim(name, int(hi), int(lo) if lo else 1) if sep else int(text))
        except ValueError as err:
            raise WorkloadError(f"workload spec {spec!r}: {text!r} is neither an integer nor a range LO..HI "
                                f"({err})") from None
    try:
        inputs, output = entry.build(*values)
    except (ValueError, TypeError) as err:
        raise WorkloadError(f"{spec} is not a valid {op} with run-time dims: {err}") from None
    return Workload(inputs, [output])


def workload_reference(wl: Workload) -> Callable[..., builtins.list]:
    """A callable computing the float64 reference outputs of `wl` from its input arrays."""
    from tilegraph.testing.reference import reference_outputs

    return lambda *arrays: reference_outputs(wl, arrays)
