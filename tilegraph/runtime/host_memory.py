"""Host arrays that start on a cache line, where kernels read them fastest.

    base = aligned_bytes(nbytes)        # zeroed uint8 view starting on a 64-byte boundary
    x64 = aligned_copy(x)               # a C-contiguous copy of x, cache-line aligned

numpy starts its allocations 16 bytes past a line (arrays unpickled from a pipe anywhere); a
tuned GEMM (GMM-1) read at offsets 16, 32 and 48 of a line ran 11-13% slower than at 0, and the
GPT-2 LM head measured in the tuner's worker on unpickled arrays 20% slower. The measurement
worker times candidates on aligned copies and a compiled model's arena is aligned, so a kernel is
tuned under the alignment it runs with.
"""

from __future__ import annotations

import numpy as np

CACHE_LINE = 64


def aligned_bytes(nbytes: int, alignment: int = CACHE_LINE) -> np.ndarray:
    """`nbytes` zeroed bytes (a uint8 view that keeps its allocation alive) starting on `alignment`."""
    owner = np.zeros(nbytes + alignment, dtype=np.uint8)
    start = -owner.ctypes.data % alignment
    return owner[start:start + nbytes]


def aligned_copy(array: np.ndarray, alignment: int = CACHE_LINE) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on `alignment`."""
    array = np.asarray(array)
    out = aligned_bytes(array.nbytes, alignment).view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


__all__ = ["CACHE_LINE", "aligned_bytes", "aligned_copy"]
