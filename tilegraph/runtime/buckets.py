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

    def __init__(self, dims: Sequence[Dim], dim_name: str, ranges: Sequence[tuple[int, int]], kernels: Sequence[Any],
                 inputs: Sequence[Any] | None = None, maps: Sequence[Sequence[int]] | None = None):
        """`inputs` and `maps` (both or neither): the kernel takes `inputs` (the dims input last) and
        bucket i's kernel gets inputs maps[i] (positions in `inputs`), the outputs as they are: each
        bucket may read its own prepacked copy of a weight (graph/prepack.py)."""
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
        if (inputs is None) != (maps is None):
            raise ValueError("a bucketed kernel's inputs and argument maps come together")
        self.maps: tuple[tuple[int, ...], ...] | None = None
        if inputs is not None and maps is not None:
            self.inputs = tuple(inputs)
            self.maps = tuple(tuple(int(i) for i in m) for m in maps)
            if len(self.maps) != len(self.kernels) or any(
                    len(m) != len(k.inputs) or any(not 0 <= i < len(self.inputs) for i in m) or m[-1] != len(self.inputs) - 1
                    for m, k in zip(self.maps, self.kernels)):
                raise ValueError("each bucket's argument map must name one of the kernel's inputs per input of its "
                                 "own, its dims input last")
        self._native: Any = None  # the native dispatcher, built at the first bind (False: none)

    @property
    def entry(self) -> str:
        """The entry point of the widest bucket's kernel (what a profile names it by)."""
        return self.kernels[-1].entry

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
            return chosen.bind(self._own(chosen, inputs), outputs, num_threads)
        widest = self.kernels[-1]  # its bucket's loops reach the range's upper bound: it checks any value
        if self.maps is None:
            arguments, outs, _ = widest._prepare(tuple(inputs), tuple(outputs), num_threads)
            return _CpuLaunch(widest, self._native, arguments, tuple(inputs), outs)
        if len(inputs) != len(self.inputs):
            raise TypeError(f"{self!r} takes {len(self.inputs)} input arrays, got {len(inputs)}")
        for kernel in self.kernels:  # each bucket's own arguments checked against its own buffers
            _, outs, threads = kernel._prepare(self._own(kernel, inputs), tuple(outputs), num_threads, check_dims=False)
        arguments = [array.ctypes.data for array in (*inputs, *outs)] + [threads]
        return _CpuLaunch(widest, self._native, arguments, tuple(inputs), outs)

    def _own(self, kernel: Any, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """`inputs` (this kernel's) as bucket kernel `kernel` takes them."""
        if self.maps is None:
            return tuple(inputs)
        return tuple(inputs[i] for i in self.maps[self.kernels.index(kernel)])

    def _native_dispatcher(self) -> Any:
        if not all(isinstance(k, Kernel) for k in self.kernels):
            return False
        if self.maps is None:
            return native_dispatcher(self.kernels, len(self.inputs) - 1, self.dim_position, self._uppers)
        n_out = len(self.outputs)
        maps = [(*m, *range(len(self.inputs), len(self.inputs) + n_out)) for m in self.maps]
        return native_dispatcher(self.kernels, len(self.inputs) - 1, self.dim_position, self._uppers,
                                 arity=len(self.inputs) + n_out, maps=maps)


__all__ = ["BucketedKernel"]
