"""Memory for a model's outputs, used again once the caller has let go of what it was lent.

    buffers = OutputBuffers(nbytes)
    out = buffers.lend((12, 1, 12, 96, 64), np.float32)   # an array in memory no live result reaches
    del out                                                # (and every view of it)
    again = buffers.lend(...)                              # the same memory, no new pages

A compiled model writes an output straight into memory handed to the caller (no copy out of the
arena). Fresh memory each call costs its page faults: a GPT-2 decode step's two 3.5 MB cache
outputs faulted in (the kernel zeroing huge pages) took 1.5 ms of a 25 ms step, as long as the
kernels writing them. Memory whose lent array is gone is reused; the caller may keep every result
it was given, and each then keeps its own memory (the array holds it, the model gone or not).

Invariant: memory is lent again only when no array reaching it lives. Each lent array's base is
its own ctypes buffer object, not an ndarray, so numpy's view collapsing stops at the lent array:
every view, reshape or torch.from_numpy of it keeps the lent array itself alive, and a weak
reference to it says whether anything still reads the memory.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence

import numpy as np

from tilegraph.runtime.host_memory import CACHE_LINE, aligned_bytes


class OutputBuffers:
    """Up to `keep` regions of `nbytes` for one output; a region whose lent array lives is never
    lent again (beyond `keep` regions live at once, a new region each call, not kept)."""

    def __init__(self, nbytes: int, alignment: int = CACHE_LINE, keep: int = 3):
        self.nbytes = max(int(nbytes), 1)
        self.alignment = alignment
        self.keep = keep
        self._regions: list[tuple[np.ndarray, weakref.ref]] = []

    def lend(self, shape: Sequence[int], dtype: np.dtype | str, offset: int = 0) -> np.ndarray:
        """An array of `shape` and `dtype` starting `offset` bytes into a region nothing lent reads."""
        free = next((i for i, (_, lent) in enumerate(self._regions) if lent() is None), None)
        memory = self._regions[free][0] if free is not None else aligned_bytes(self.nbytes, self.alignment)
        holder = (ctypes.c_char * self.nbytes).from_address(memory.ctypes.data)
        holder.memory = memory  # the lent array keeps its region alive through the holder
        array = np.ndarray(tuple(shape), dtype=np.dtype(dtype), buffer=holder, offset=offset)
        if free is not None:
            self._regions[free] = (memory, weakref.ref(array))
        elif len(self._regions) < self.keep:
            self._regions.append((memory, weakref.ref(array)))
        return array

    @property
    def regions(self) -> int:
        """How many regions are kept for lending again."""
        return len(self._regions)


__all__ = ["OutputBuffers"]
