"""Broadcast operands whose register-tile rows collide in the L1 cache, and the layout that fixes it.

A register tile of r rows broadcasts one element of each of its r rows of A per reduction step.
When those rows lie a multiple of 4 KiB apart (an NHWC activation with 1024 or 2048 channels:
ResNet-50's stage-3 and stage-4 1x1 convolutions, every pixel 4 or 8 KiB after the previous),
all r lines map to the same L1 set; with more rows than the set has ways, every broadcast misses
L1. A 14-pixel tile of a 1x1 convolution over 1024 channels ran 19.6 GFLOP/s on a Zen 3 core,
57 with the rows 1040 floats apart.

The cure is BLIS's packed A: copy the operand once per call so that each tile's rows are
interleaved along the reduction, every step's r elements adjacent. For x[n, h, w, c] and a tile
of 7 x 2 pixels:

    x_global[n, h // 7, w // 2, c, h % 7, w % 2] = x[n, h, w, c]      (a step reads 14 floats
                                                                       in one or two lines)
"""

from __future__ import annotations

from itertools import product

from tilegraph.tune.gensor.state import EtirState, IterSpace, Operand

SET_PERIOD_BYTES = 4096  # lines this far apart share an L1 set (32 KiB 8-way, 48 KiB 12-way, ...)
LINE_BYTES = 64
MAX_ROWS_PER_SET = 4     # half the ways of an 8-way L1: the rest hold B's panel and prefetches


def aliasing_broadcast_operands(space: IterSpace, state: EtirState) -> list[Operand]:
    """Operands the micro-kernel broadcasts (not read along the vector axis) whose register tile's
    rows put more than MAX_ROWS_PER_SET lines in one L1 set, and that `tile_rows_layout` can fix."""
    return [op for op in space.operands
            if aliased_rows(space, state, op) and tile_rows_layout(space, state, op) is not None]


def aliased_rows(space: IterSpace, state: EtirState, op: Operand) -> int:
    """How many of the register tile's broadcast rows of `op` share an L1 set with more than
    MAX_ROWS_PER_SET others (each then misses L1 at every reduction step, read in place); 0 for
    an operand read along the vector axis."""
    if state.vec_axis < 0 or state.vec_axis in op.axes_used():
        return 0
    return sum(n for n in _rows_per_set(space, state, op).values() if n > MAX_ROWS_PER_SET)


def tile_rows_layout(space: IterSpace, state: EtirState, op: Operand) -> dict | None:
    """The layout that interleaves a register tile's rows of `op` innermost: every dimension a
    spatial axis of the tile indexes (alone, coefficient 1) split by the tile's extent, outer
    parts in place, the reduction's dimensions next, the inner parts last. None when a tiled
    dimension is indexed otherwise (a strided or windowed convolution's input), the tile does not
    divide it, or the tile has a single row."""
    tiled: dict[int, int] = {}
    for d, terms in enumerate(op.dims):
        if terms is None:
            return None
        spatial = [t for t in terms if t[0] < space.num_spatial and state.reg[t[0]] > 1]
        if not spatial:
            continue
        if len(terms) != 1 or terms[0][1:] != (1,):
            return None
        reg = state.reg[terms[0][0]]
        if op.shape[d] % reg:
            return None
        if reg < op.shape[d]:
            tiled[d] = reg
    if not tiled:
        return None
    position, at = {}, 0
    for d in range(len(op.dims)):
        position[d] = at
        at += 2 if d in tiled else 1
    spatial_dims = spatial_dims_of(space, op)
    reduce_dims = [d for d in range(len(op.dims)) if d not in spatial_dims]
    order = [position[d] for d in spatial_dims] + [position[d] for d in reduce_dims] + [position[d] + 1 for d in sorted(tiled)]
    return {"split": [[d, f] for d, f in sorted(tiled.items())], "order": order}


def spatial_dims_of(space: IterSpace, op: Operand) -> list[int]:
    """The dimensions of `op` indexed by spatial axes only: `tile_rows_layout` keeps their outer
    parts first, in place, so its copy's leading loops run over them."""
    return [d for d, terms in enumerate(op.dims) if terms is not None and all(t[0] < space.num_spatial for t in terms)]


def _rows_per_set(space: IterSpace, state: EtirState, op: Operand) -> dict[int, int]:
    """L1 set -> how many of the tile's rows start in it (row-major `op`)."""
    strides, step = [0] * len(op.shape), op.dtype_bytes
    for d in range(len(op.shape) - 1, -1, -1):
        strides[d] = step
        step *= op.shape[d]
    ranges = []
    for d, terms in enumerate(op.dims):
        axes = [t[0] for t in terms or () if t[0] < space.num_spatial]
        ranges.append(range(min(state.reg[axes[0]], op.shape[d])) if len(axes) == 1 else range(1))
    sets: dict[int, int] = {}
    for idx in product(*ranges):
        line = sum(i * s for i, s in zip(idx, strides)) % SET_PERIOD_BYTES // LINE_BYTES
        sets[line] = sets.get(line, 0) + 1
    return sets
