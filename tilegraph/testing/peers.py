"""numpy / torch equivalents of library ops, for `tilegraph bench --vs numpy,torch`.

    fn = peer_function("numpy", workload, inputs)   # a no-argument callable, or None if unsupported
    fn()

An op is found from the output tensor's recorded `ref_op` / `ref_params` / `ref_args` attributes
(set by tilegraph.ops); tensor arguments are taken from the workload's inputs by position.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.te.workload import Workload

PEERS = ("numpy", "torch")


class PeerUnavailable(Exception):
    """The peer library is not installed or has no equivalent of this op; the message says which."""


def _np_matmul(a: Any, b: Any, bias: Any = None, transpose_a: bool = False, transpose_b: bool = False, **_: Any) -> Any:
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    return lambda: (a @ b) if bias is None else (a @ b + bias)


def _np_dense(x: Any, w: Any, bias: Any = None, **_: Any) -> Any:
    return _np_matmul(x, w, bias, transpose_b=True)


def _np_softmax(x: Any, axis: int = -1, **_: Any) -> Any:
    def run() -> Any:
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    return run


_NUMPY: dict[str, Callable[..., Callable[[], Any]]] = {
    "matmul": _np_matmul,
    "dense": _np_dense,
    "batch_matmul": lambda a, b, **_: (lambda: np.matmul(a, b)),
    "relu": lambda x, **_: (lambda: np.maximum(x, 0)),
    "add": lambda a, b, **_: (lambda: np.add(a, b)),
    "sub": lambda a, b, **_: (lambda: np.subtract(a, b)),
    "mul": lambda a, b, **_: (lambda: np.multiply(a, b)),
    "softmax": _np_softmax,
}


def _torch_table(torch: Any) -> dict[str, Callable[..., Callable[[], Any]]]:
    F = torch.nn.functional

    def matmul(a: Any, b: Any, bias: Any = None, transpose_a: bool = False, transpose_b: bool = False, **_: Any) -> Any:
        a = a.t() if transpose_a else a
        b = b.t() if transpose_b else b
        return lambda: torch.matmul(a, b) if bias is None else torch.addmm(bias, a, b)

    def conv2d_nchw(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, **_: Any) -> Any:
        return lambda: F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation)

    def conv2d_nhwc(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                    **_: Any) -> Any:
        # torch has no NHWC kernel entry point: channels_last memory format is its equivalent
        xc = x.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
        wc = w.permute(3, 2, 0, 1).contiguous()
        # the result is NCHW-shaped in channels_last memory: permuted back to NHWC (a view, no copy)
        return lambda: F.conv2d(xc, wc, stride=stride, padding=padding, dilation=dilation,
                                groups=groups).permute(0, 2, 3, 1)

    def max_pool2d(x: Any, kernel: Any, stride: Any = 1, padding: Any = 0, layout: str = "NCHW", **_: Any) -> Any:
        if layout == "NHWC":
            xc = x.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
            return lambda: F.max_pool2d(xc, kernel, stride, padding).permute(0, 2, 3, 1)
        return lambda: F.max_pool2d(x, kernel, stride, padding)

    def mean(x: Any, axis: Any = None, keepdims: bool = False, **_: Any) -> Any:
        dims = tuple(range(x.dim())) if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))
        return lambda: torch.mean(x, dim=dims, keepdim=bool(keepdims))

    def layer_norm(x: Any, gamma: Any, beta: Any, axis: Any = -1, epsilon: float = 1e-5, **_: Any) -> Any:
        axes = sorted(a % x.dim() for a in ((axis,) if isinstance(axis, int) else axis))
        if axes != list(range(x.dim() - len(axes), x.dim())):
            raise PeerUnavailable(f"torch's layer_norm normalises trailing axes only, got axis={axis!r}")
        return lambda: F.layer_norm(x, tuple(gamma.shape), gamma, beta, eps=epsilon)

    return {
        "layer_norm": layer_norm,
        "matmul": matmul,
        "dense": lambda x, w, bias=None, **_: (lambda: F.linear(x, w, bias)),
        "batch_matmul": lambda a, b, **_: (lambda: torch.bmm(a, b)),
        "matmul_nd": lambda a, b, **_: (lambda: torch.matmul(a, b)),
        "max_pool2d": max_pool2d,
        "mean": mean,
        "relu": lambda x, **_: (lambda: torch.relu(x)),
        "add": lambda a, b, **_: (lambda: torch.add(a, b)),
        "sub": lambda a, b, **_: (lambda: torch.sub(a, b)),
        "mul": lambda a, b, **_: (lambda: torch.mul(a, b)),
        "softmax": lambda x, axis=-1, **_: (lambda: torch.softmax(x, dim=axis)),
        "conv2d_nchw": conv2d_nchw,
        "conv2d_nhwc": conv2d_nhwc,
    }


def _op_call(workload: Workload) -> tuple[str, dict[str, Any], list[tuple[str, int]]]:
    out = workload.outputs[-1]
    attrs = dict(getattr(out.op, "attrs", ()))
    op = attrs.get("ref_op") or workload.op_name
    params = dict(attrs.get("ref_params") or ())
    args = list(attrs.get("ref_args") or ())
    if not args:  # no record of the call: assume the inputs are the tensor arguments in order
        args = [(f"_{n}", n) for n in range(len(workload.inputs))]
    return str(op), params, args


def peer_function(peer: str, workload: Workload, inputs: Sequence[np.ndarray]) -> Callable[[], Any]:
    """A callable running the peer's equivalent of `workload` on `inputs`; raises PeerUnavailable."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; known peers: {', '.join(PEERS)}")
    if importlib.util.find_spec(peer) is None:
        raise PeerUnavailable(f"{peer} is not installed")
    op, params, args = _op_call(workload)
    if peer == "numpy":
        table, arrays = _NUMPY, list(inputs)
    else:
        import torch

        table, arrays = _torch_table(torch), [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    if op not in table:
        raise PeerUnavailable(f"{peer} has no equivalent of {op} in tilegraph's peer table")
    try:
        tensors = {name: arrays[position] for name, position in args}
    except IndexError:
        raise PeerUnavailable(f"cannot map the arguments of {op} onto the workload inputs") from None
    positional = [tensors[name] for name, _ in args if name.startswith("_")]
    keyword = {name: value for name, value in tensors.items() if not name.startswith("_")}
    # (no torch.set_grad_enabled(False) here: it changed the caller's process for good; the inputs
    # made from numpy do not require grad, so nothing is recorded for autograd anyway)
    return table[op](*positional, **keyword, **params)
