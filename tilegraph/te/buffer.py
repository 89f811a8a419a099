"""Buffer: a named multi-dimensional array of the loop IR.

It lives in te because the expression node `BufferLoad` (te/expr.py) names one; `tilegraph.loop.ir`
re-exports it, and the loop IR is where buffers are made (one per tensor, plus the copies that
schedule primitives create).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegraph.dtype import DType
from tilegraph.hashing import hash_once


@hash_once
@dataclass(frozen=True)
class Buffer:
    """A named multi-dimensional array. `padding` adds storage elements per dimension
    (allocated extent = shape + padding) without changing the indexable shape."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    scope: str = "global"
    padding: tuple[int, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def storage_shape(self) -> tuple[int, ...]:
        if not self.padding:
            return self.shape
        return tuple(s + p for s, p in zip(self.shape, self.padding))

    @property
    def size(self) -> int:
        n = 1
        for s in self.storage_shape:
            n *= s
        return n
