"""Host arrays that start on a cache line, where kernels read them fastest.

    base = aligned_bytes(nbytes)        # zeroed uint8 view starting on a 64-byte boundary
    x64 = aligned_copy(x)               # a C-contiguous copy of x, cache-line aligned
    y = aligned_zeros((m, n), np.float32)   # a zeroed array starting on a line (a kernel output)

Arrays from 2 MB on are placed in huge-page regions (`huge_page_bytes`), model weights too
(`in_huge_pages`).

numpy starts its allocations 16 bytes past a line (arrays unpickled from a pipe anywhere); a
tuned GEMM (GMM-1) read at offsets 16, 32 and 48 of a line ran 11-13% slower than at 0, and the
GPT-2 LM head measured in the tuner's worker on unpickled arrays 20% slower. The measurement
worker times candidates on aligned copies and a compiled model's arena is aligned, so a kernel is
tuned under the alignment it runs with. A kernel called from Python allocates its outputs so, and
`kernel.time()` times inputs that do not start on a line on aligned copies: a timing says what the
kernel costs, not where numpy's allocator happened to put an array.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping

import numpy as np

CACHE_LINE = 64
HUGE_PAGE = 2 << 20  # a transparent huge page on x86-64 and most arm64 kernels


def aligned_bytes(nbytes: int, alignment: int = CACHE_LINE) -> np.ndarray:
    """`nbytes` zeroed bytes (a uint8 view that keeps its allocation alive) starting on `alignment`;
    from 2 MB on, in a huge-page region (`huge_page_bytes`), so a kernel streaming a large array
    from memory reads it as fast in the tuner's timing as in a compiled model."""
    if nbytes >= HUGE_PAGE and HUGE_PAGE % alignment == 0:
        return huge_page_bytes(nbytes)
    return _aligned(nbytes, alignment)


def _aligned(nbytes: int, alignment: int) -> np.ndarray:
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


def huge_page_bytes(nbytes: int) -> np.ndarray:
    """`nbytes` zeroed bytes starting on a 2 MB boundary, in memory the OS is asked to back with
    transparent huge pages (Linux's madvise(MADV_HUGEPAGE), which THP's default "madvise" mode
    honours); below 2 MB, or where the OS has no such advice, `aligned_bytes`.

    A model's weights stream from memory at every call when they exceed the last-level cache (a
    decoder's step reads all of them for one token): with 4 KB pages every 4 KB of them costs a
    TLB miss, a two-level page walk on a virtual machine. Reading 9.4 MB from memory on the
    Sapphire Rapids VM: 7.7 GB/s with 4 KB pages, 11.9 GB/s with huge pages (one thread)."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if nbytes < HUGE_PAGE or advice is None:
        return _aligned(nbytes, CACHE_LINE)
    size = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    try:
        region = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return _aligned(nbytes, CACHE_LINE)
    owner = np.frombuffer(region, dtype=np.uint8)  # keeps the mapping alive while any view lives
    start = -owner.ctypes.data % HUGE_PAGE
    try:
        region.madvise(advice, start, size)
    except OSError:  # THP compiled out, or "never": ordinary pages, nothing lost
        pass
    return owner[start:start + nbytes]


def in_huge_pages(arrays: Mapping[str, np.ndarray], min_bytes: int = 1 << 20) -> dict[str, np.ndarray]:
    """`arrays` with each of at least `min_bytes` copied into one huge-page region (read-only,
    C-contiguous, each on a cache line); the smaller ones as they are."""
    large = {k: a for k, a in arrays.items() if a.nbytes >= min_bytes}
    total = sum(-(-a.nbytes // CACHE_LINE) * CACHE_LINE for a in large.values())
    if not large or total < HUGE_PAGE:
        return dict(arrays)
    region = huge_page_bytes(total)
    moved: dict[str, np.ndarray] = {}
    offset = 0
    for name, array in large.items():
        view = region[offset:offset + array.nbytes].view(array.dtype).reshape(array.shape)
        view[...] = array
        view.flags.writeable = False
        moved[name] = view
        offset += -(-array.nbytes // CACHE_LINE) * CACHE_LINE
    return {k: moved.get(k, a) for k, a in arrays.items()}


__all__ = ["CACHE_LINE", "HUGE_PAGE", "aligned_bytes", "aligned_copy", "aligned_zeros", "huge_page_bytes",
           "in_huge_pages"]
