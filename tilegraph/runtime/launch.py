"""The kernel protocol every target's kernel implements, and the one way kernels are timed.

    kernel(*inputs, out=None, num_threads=None)        numpy in, numpy out (out= writes into arrays)
    launch = kernel.bind(inputs, outputs)               arguments checked and placed once
    launch.run()                                        one complete run; returns when the device is done
    launch.outputs()                                    the outputs on the host, as the last run left them
    kernel.time(*inputs, ...) -> TimingResult           timer.measure(launch.run, ...)
    kernel.source, kernel.target, kernel.inputs, kernel.outputs

`Kernel` (CPU, ctypes), `OpenCLKernel` and `CudaKernel` all derive from `KernelBase`, so
`kernel.time()`, the tuner's runner (tune/runner.py) and the benchmarks time the same way:
warm-up, then samples of `number` runs each (batched for fast kernels) until `repeat` samples and
`min_time` seconds, garbage collection off while sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tilegraph.runtime.host_memory import CACHE_LINE, aligned_copy, aligned_zeros
from tilegraph.runtime.timer import CacheFlusher, TimingResult, measure
from tilegraph.target import Target
from tilegraph.te.buffer import Buffer

MIN_FLUSH_BYTES = 8 << 20
_flushers: dict[int, CacheFlusher] = {}


class Launch(Protocol):
    def run(self) -> None:
        """One complete run of the kernel on the bound arrays; returns once the device has finished."""

    def outputs(self) -> list[np.ndarray]:
        """The output arrays on the host, as the last run left them."""


@runtime_checkable
class KernelProtocol(Protocol):
    source: str
    target: Target
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]

    def __call__(self, *inputs: Any, out: Any = None, num_threads: int | None = None) -> Any: ...

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> Launch: ...

    def time(self, *inputs: np.ndarray, warmup: int = 2, min_time: float = 0.2, repeat: int = 5,
             number: int | None = None, num_threads: int | None = None, flush_cache: bool = False,
             out: Any = None) -> TimingResult: ...


class KernelBase:
    """What every kernel shares: outputs for `out=`, `__call__` through `bind`, and `time`."""

    source: str
    target: Target
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> Launch:
        raise NotImplementedError

    def output_arrays(self, out: Any) -> list[np.ndarray]:
        """The arrays `out=` names (checked by `bind`), or fresh ones starting on a cache line, where
        a compiled model's arena and the tuner's runner put them (host_memory.py; whoever checks a
        kernel poisons them first, as the runner does, and GPU kernels poison theirs, which travel
        to the device anyway)."""
        if out is None:
            return [aligned_zeros(b.shape, b.dtype.array_numpy) for b in self.outputs]
        given = [out] if isinstance(out, np.ndarray) else list(out) if isinstance(out, (list, tuple)) else None
        if given is None:
            raise TypeError(f"out must be a numpy array or a tuple of them, got {type(out).__name__}")
        if len(given) != len(self.outputs):
            raise TypeError(f"the kernel has {len(self.outputs)} outputs, out= gave {len(given)}")
        return given

    def __call__(self, *inputs: Any, out: Any = None, num_threads: int | None = None) -> Any:
        launch = self.bind(list(inputs), self.output_arrays(out), num_threads)
        launch.run()
        results = launch.outputs()
        return results[0] if len(results) == 1 else tuple(results)

    def time(self, *inputs: np.ndarray, warmup: int = 2, min_time: float = 0.2, repeat: int = 5,
             number: int | None = None, num_threads: int | None = None, flush_cache: bool = False,
             out: Any = None, max_samples: int | None = None) -> TimingResult:
        """Seconds per run on these inputs (arguments checked and placed once, outside the timed
        region); an input that does not start on a cache line is timed on an aligned copy of it, as
        the kernel runs in a compiled model and in the tuner (numpy starts arrays 16 bytes past a line)."""
        placed = [aligned_copy(a) if _off_a_line(a) else a for a in inputs]
        launch = self.bind(placed, self.output_arrays(out), num_threads)
        flush = cache_flusher(self.target) if flush_cache else None
        return measure(launch.run, warmup=warmup, min_time=min_time, repeat=repeat, number=number, flush=flush,
                       max_samples=max_samples)


def _off_a_line(array: Any) -> bool:
    """A C-contiguous numpy array, aligned to its dtype, that does not start on a cache line (any
    other argument meets bind's checks as given)."""
    return (isinstance(array, np.ndarray) and array.flags.c_contiguous and array.flags.aligned
            and array.ctypes.data % CACHE_LINE != 0)


def cache_flusher(target: Target | None = None) -> CacheFlusher:
    """A buffer twice the last-level cache of `target` (l3_bytes is per core), shared per size."""
    nbytes = MIN_FLUSH_BYTES
    if target is not None and target.l3_bytes and target.num_cores:
        nbytes = max(MIN_FLUSH_BYTES, 2 * target.l3_bytes * target.num_cores)
    flusher = _flushers.get(nbytes)
    if flusher is None:
        flusher = _flushers.setdefault(nbytes, CacheFlusher(nbytes))
    return flusher


def check_flat_arrays(params: Sequence[Buffer], arrays: Sequence[np.ndarray], role: str = "argument") -> None:
    """GPU kernels take arrays by element count: no array of the wrong size, dtype or layout reaches
    a device buffer. As on the CPU: a wrong count or dtype is a TypeError (never cast), a wrong
    size or layout a ValueError."""
    if len(params) != len(arrays):
        raise TypeError(f"the kernel takes {len(params)} {role} arrays, got {len(arrays)}")
    for b, a in zip(params, arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{role} {b.name!r} must be a numpy.ndarray, got {type(a).__name__}")
        if not b.dtype.holds(a.dtype):
            raise TypeError(f"{role} {b.name!r} has dtype {a.dtype}, expected {b.dtype} (tilegraph does not cast)")
        if a.size != b.size or not a.flags.c_contiguous:
            raise ValueError(f"{role} {b.name!r}: expected {b.size} contiguous {b.dtype} elements, "
                             f"got shape {a.shape} of {a.dtype}")


__all__ = ["KernelBase", "KernelProtocol", "Launch", "cache_flusher", "check_flat_arrays"]
