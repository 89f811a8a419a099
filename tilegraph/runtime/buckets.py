"""BucketedKernel: one kernel per bucket of a run-time dim, the call dispatched by the dim's value.

    kernel = tg.tune_buckets(wl, "seq", trials=32)       # tune/buckets.py: each bucket tuned at its upper
    y = kernel(x, w, dims_array(wl.dims, {"seq": 37}))   # runs the kernel of the bucket [33, 64]

Every bucket's kernel takes the same arrays (storage at the dim's upper bound, te/dims.py), so a
call is the bucket's kernel called as it is; a size never tuned runs its bucket's kernel, never a
new compile. CPU kernels are called through a native dispatcher with a kernel's own ABI
(runtime/dispatch.py), which reads the value at each run: a launch bound once serves every value
written into its dims array later, and whatever calls kernels natively can call this one.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.runtime.dispatch import native_dispatcher
from tilegraph.runtime.kernel import Kernel, _CpuLaunch
from tilegraph.runtime.launch import KernelBase, Launch
from tilegraph.te.dims import Dim, check_values


class BucketedKernel(KernelBase):
    """Kernels of one computation, one per bucket [lo, hi] of `dim` (ascending, contiguous)."""

    def __init__(self, dims: Sequence[Dim], dim_name: str, ranges: Sequence[tuple[int, int]], kernels: Sequence[Any]):
        if len(ranges) != len(kernels) or not kernels:
            raise ValueError(f"a bucketed kernel needs one kernel per bucket, got {len(ranges)} buckets and "
                             f"{len(kernels)} kernels")
        if any(a[1] + 1 != b[0] for a, b in zip(ranges, ranges[1:])):
            raise ValueError(f"buckets must be contiguous and ascending, got {list(ranges)}")
        self.dims = tuple(dims)
        self.dim_position = [d.name for d in self.dims].index(dim_name)
        self.dim_name = dim_name
        self.ranges = tuple(ranges)
        self.kernels = tuple(kernels)
        self._uppers = [hi for _, hi in self.ranges]
        first = self.kernels[0]
        self.inputs, self.outputs, self.target, self.source = first.inputs, first.outputs, first.target, first.source
        self._native: Any = None  # the native dispatcher, built at the first bind (False: none)

    def __repr__(self) -> str:
        return f"BucketedKernel({self.dim_name}: {', '.join(f'[{lo}, {hi}]' for lo, hi in self.ranges)})"

    def kernel_for(self, dims: np.ndarray) -> Any:
        """The kernel of the bucket holding the dim's value in `dims` (the dims input array)."""
        values = {d.name: int(v) for d, v in zip(self.dims, np.asarray(dims).reshape(-1))}
        check_values(self.dims, values)
        value = values[self.dim_name]
        if not self.ranges[0][0] <= value <= self.ranges[-1][1]:
            raise ValueError(f"dim {self.dim_name!r} = {value} is outside the buckets "
                             f"[{self.ranges[0][0]}, {self.ranges[-1][1]}]")
        return self.kernels[bisect.bisect_left(self._uppers, value)]

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> Launch:
        """CPU kernels: one native call that picks the bucket at every run (runtime/dispatch.py),
        the arguments checked once here against the whole range; other kernels: the bucket of the
        value given here."""
        if not inputs:
            raise TypeError(f"{self!r} takes its inputs, the dims array last")
        chosen = self.kernel_for(inputs[-1])  # the values checked against the dims and the buckets
        if self._native is None:
            self._native = self._native_dispatcher()
        if self._native is False:
            return chosen.bind(inputs, outputs, num_threads)
        widest = self.kernels[-1]  # its bucket's loops reach the range's upper bound: it checks any value
        arguments, outs, _ = widest._prepare(tuple(inputs), tuple(outputs), num_threads)
        return _CpuLaunch(widest, self._native, arguments, tuple(inputs), outs)

    def _native_dispatcher(self) -> Any:
        if not all(isinstance(k, Kernel) for k in self.kernels):
            return False
        return native_dispatcher(self.kernels, len(self.inputs) - 1, self.dim_position, self._uppers)


__all__ = ["BucketedKernel"]
