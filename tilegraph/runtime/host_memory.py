"""Host arrays that start on a cache line, where kernels read them fastest.

    base = aligned_bytes(nbytes)        # zeroed uint8 view starting on a 64-byte boundary
    x64 = aligned_copy(x)               # a C-contiguous copy of x, cache-line aligned
    y = aligned_zeros((m, n), np.float32)   # a zeroed array starting on a line (a kernel output)

numpy starts its allocations 16 bytes past a line (arrays unpickled from a pipe anywhere); a
tuned GEMM (GMM-1) read at offsets 16, 32 and 48 of a line ran 11-13% slower than at 0, and the
GPT-2 LM head measured in the tuner's worker on unpickled arrays 20% slower. The measurement
worker times candidates on aligned copies and a compiled model's arena is aligned, so a kernel is
tuned under the alignment it runs with. A kernel called from Python allocates its outputs so, and
`kernel.time()` times inputs that do not start on a line on aligned copies: a timing says what the
kernel costs, not where numpy's allocator happened to put an array.
"""

from __future__ import annotations

import numpy as np

CACHE_LINE = 64


def aligned_bytes(nbytes: int, alignment: int = CACHE_LINE) -> np.ndarray:
    """`nbytes` zeroed bytes (a uint8 view that keeps its allocation alive) starting on `alignment`."""
    owner = np.zeros(nbytes + alignment, dtype=np.uint8)
    start = -owner.ctypes.data % alignment
    return owner[start:start + nbytes]


def aligned_zeros(shape: tuple[int, ...], dtype: np.dtype | type, alignment: int = CACHE_LINE) -> np.ndarray:
    """A zeroed C-contiguous array of `shape` and `dtype` whose data starts on `alignment`."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    return aligned_bytes(count * dtype.itemsize, alignment).view(dtype).reshape(shape)


def aligned_copy(array: np.ndarray, alignment: int = CACHE_LINE) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on `alignment`."""
    array = np.asarray(array)
    out = aligned_zeros(array.shape, array.dtype, alignment)
    out[...] = array
    return out


__all__ = ["CACHE_LINE", "aligned_bytes", "aligned_copy", "aligned_zeros"]
