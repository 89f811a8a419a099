"""Register tiles on the CPU's matrix unit (AMX): which states a workload has, and what they cost.

    kind = matrix_kind(space, target)            # "bfloat16" / "int8" / None
    states = matrix_states(space, hw, kind)      # EtirState(matrix=True), every choice below
    seconds = predict_matrix(space, hw, state)   # PerfModel.predict's answer for them

A matrix state is the register micro-kernel of to_trace.py with tile-shaped choices: its
accumulators are AMX tiles (16 rows of 16 float32 or int32), so the register tile is 16 or 32
rows (a's row tiles) by 16 to 64 columns (b's column tiles), within 8 tile registers (row tiles x
column tiles accumulators, plus one per row tile and per column tile); the last reduction is
split in the unit's K groups (unroll = dot_group: bfloat16 pairs, int8 quads) and b is packed in
micro-panels of those groups (to_trace.matrix_panel_layout). Lowering turns its nest into one
TileProduct (lower/passes/use_matrix_tiles.py); a state whose nest it would not take is not made.
Rows come from the axes a (the operand read along the reduction) uses: the innermost one in tiles
of up to 16 rows (a convolution's output columns), and at most one more, outer, in 1 or 2 (its
output rows: two row tiles). Every tile and block divides its axis (a guard would break the nest).

The model: one tile product over K costs, per step (depth elements of K), a tdp per accumulator
(16 cycles for 16 rows: TMUL does a row a cycle) and its tile loads (a's rows from L1 when its panel
stays there across the task's column tiles, else L2; b's from L2 when the task's panel fits it, else
L3), the larger of the two; plus per tile a fixed cost (the configuration check, loading and
storing the accumulators, the epilogue on the vector unit). Tasks share the cores.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from tilegraph.lower.passes.use_matrix_tiles import a_registers
from tilegraph.tune.gensor.perf_model import CAPACITY_FRACTION, PARALLEL_OVERHEAD_S, Breakdown
from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical, packable_operands, parallel_tasks
from tilegraph.tune.hardware import HardwareModel

TILE_ROWS = 16
TILE_REGISTERS = 8
TILE_ROW_BYTES = 64
GROUPS = {"bfloat16": 2, "int8": 4}
ROW_CYCLES = 1.0        # a tdp's cycles per row of its a tile (16 for a full tile: 512 bf16 MACs a cycle)
TILE_FIXED_CYCLES = 200.0  # per tile product: the accumulators' zeroing and stores, the loop around
TASK_FIXED_CYCLES = 2000.0  # per parallel task: handing it out, its first tiles' cold operands
L1_BYTES_PER_CYCLE = 128.0
L2_BYTES_PER_CYCLE = 32.0
L3_BYTES_PER_CYCLE = 10.0
NR_CHOICES = (16, 32, 48, 64)
MAX_TILE_ROWS = 64  # rows of a register tile (its row tiles' accumulators and a's registers must fit too)
MAX_ROW_TILES = 4


@dataclass(frozen=True)
class MatrixShape:
    """The operands of a workload's register tile on the matrix unit."""

    a: str                  # the operand read along the last reduction (tile rows: its spatial axes)
    b: str                  # the packed operand (tile columns: the vector axis)
    rows: tuple[int, ...]   # spatial axes a uses, outermost first (the vector axis excluded)
    group: int
    depth: int              # reduction elements per step


def matrix_kind(space: IterSpace, target: object) -> str | None:
    """"bfloat16" or "int8" when the anchor multiplies operands of that kind and `target` has
    matrix tiles for them, else None."""
    from tilegraph.target import has_matrix_tiles

    widths = sorted({o.dtype_bytes for o in space.operands})
    kind = {(2,): "bfloat16", (1,): "int8"}.get(tuple(widths))
    if kind is None or space.kind != "reuse" or not space.has_reduce or not has_matrix_tiles(target, kind):
        return None
    return kind


def fits_tiles(columns: int, depth: int, kind: str) -> bool:
    """Whether a product of `columns` output columns reducing `depth` elements along its last
    reduction fits the matrix unit's tiles: whole 16-column tiles, the depth in whole K groups, and
    steps of whole tile rows (one step when it is shorter than a tile row)."""
    group = GROUPS[kind]
    per_step = TILE_ROW_BYTES // (group * (1 if kind == "int8" else 2))  # K groups per tile row
    return columns % TILE_ROWS == 0 and depth % group == 0 and (depth // group <= per_step or
                                                                 (depth // group) % per_step == 0)


def matrix_shape(space: IterSpace, kind: str) -> MatrixShape | None:
    """Which operand is a and which b, or None when the anchor is no tile product: b packable
    and indexed by the vector axis, a contiguous along the last reduction and not indexed by the
    vector axis; the last reduction's extent in whole K groups, a step at most a tile row."""
    v, last = space.vec_axis, space.num_spatial + len(space.reduce) - 1
    if v < 0 or not fits_tiles(space.spatial[v], space.reduce[-1], kind):
        return None
    group = GROUPS[kind]
    extent = space.reduce[-1]
    per_step = TILE_ROW_BYTES // (group * (1 if kind == "int8" else 2))
    bs = [o for o in space.operands if o.name in packable_operands(space) and v in o.axes_used()]
    as_ = [o for o in space.operands if o.contiguous_axis() == last and v not in o.axes_used()]
    if len(bs) != 1 or len(as_) != 1:
        return None
    # a batch axis indexes b too: its register tile is 1 (each batch its own product)
    rows = tuple(sorted(a for a in as_[0].axes_used() - bs[0].axes_used() if a < space.num_spatial))
    return MatrixShape(as_[0].name, bs[0].name, rows, group, min(extent, per_step * group))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _tiles_fit(row_tiles: tuple[int, ...], nr: int) -> bool:
    return a_registers(row_tiles, nr // TILE_ROWS) is not None


def _row_choices(space: IterSpace, shape: MatrixShape) -> list[tuple[dict[int, int], tuple[int, ...]]]:
    """(register-tile rows per axis, a's row tiles' rows): the innermost row axis in up to 32 rows
    (a divisor of its extent, 8 or more unless the axis is shorter) and any divisor of an outer
    one (each of its rows more row tiles), every other spatial axis 1, up to MAX_TILE_ROWS rows in
    MAX_ROW_TILES tiles. Where a's rows run on across the outer axis (a 1x1 convolution: x[h, w] one
    row of channels after the other) and the inner tile is the whole inner axis, the rows are one
    run, cut in tiles of 16 across it (ResNet-50's 7 x 7 maps: 49 rows in 16, 16, 16 and 1)."""
    if not shape.rows:
        return [({}, (1,))]
    inner, outer = shape.rows[-1], shape.rows[-2] if len(shape.rows) > 1 else None
    extent = space.spatial[inner]
    choices = []
    for r in _divisors(extent):
        if r > 2 * TILE_ROWS or (r < 8 and r != extent):
            continue
        choices.append(({inner: r}, _cut(r)))
        if outer is None:
            continue
        run_on = r == extent and _rows_run_on(space, shape, outer, inner)
        for ro in _divisors(space.spatial[outer])[1:]:
            tiles = _cut(ro * r) if run_on else _cut(r) * ro
            if sum(tiles) <= MAX_TILE_ROWS and len(tiles) <= MAX_ROW_TILES:
                choices.append(({inner: r, outer: ro}, tiles))
    return choices


def _cut(rows: int) -> tuple[int, ...]:
    return tuple(min(TILE_ROWS, rows - first) for first in range(0, rows, TILE_ROWS))


def _rows_run_on(space: IterSpace, shape: MatrixShape, outer: int, inner: int) -> bool:
    """Whether a's rows along `outer` follow its rows along `inner` in memory: a indexes them by
    consecutive dimensions, each by its axis alone, the inner one exactly as long as the axis."""
    a = next(o for o in space.operands if o.name == shape.a)
    dims = {d: dim for d, dim in enumerate(a.dims) if dim is not None and len(dim) == 1 and len(dim[0]) == 2}
    where = {dim[0]: d for d, dim in dims.items() if dim[0][1] == 1}
    d_outer, d_inner = where.get((outer, 1)), where.get((inner, 1))
    return d_outer is not None and d_inner == d_outer + 1 and a.shape[d_inner] == space.spatial[inner]


def matrix_states(space: IterSpace, hw: HardwareModel, kind: str, limit: int = 64) -> list[EtirState]:
    """Every matrix state of the space (none when it has no tile product), best predicted first,
    at most `limit`."""
    shape = matrix_shape(space, kind)
    if shape is None:
        return []
    v, n = space.vec_axis, space.spatial[space.vec_axis]
    out = set()
    for rows, row_tiles in _row_choices(space, shape):
        for nr in NR_CHOICES:
            if n % nr or not _tiles_fit(row_tiles, nr):
                continue
            reg = tuple(nr if a == v else rows.get(a, 1) for a in range(space.num_spatial))
            for l2 in _blocks(space, reg, v, hw.cores):
                tasks_axes = [a for a in range(space.num_spatial) if space.spatial[a] // l2[a] > 1]
                state = EtirState(reg, reg, l2, space.reduce, v, TILE_ROWS, shape.group, len(tasks_axes) or 1,
                                  (shape.b,), shape.group, True)
                out.add(canonical(space, state))
    ranked = sorted(out, key=lambda s: (predict_matrix(space, hw, s).seconds, repr(s)))
    return ranked[:limit]


def _blocks(space: IterSpace, reg: tuple[int, ...], v: int, cores: int) -> list[tuple[int, ...]]:
    """Per-task blocks: the vector axis in 1, 2, 4, ... register tiles or whole; each row axis whole
    or halved (in register tiles); other axes one at a time."""
    options = []
    for a, (e, r) in enumerate(zip(space.spatial, reg)):
        if a == v:
            sizes = {r * 2 ** k for k in range(12) if r * 2 ** k <= e and e % (r * 2 ** k) == 0} | {e}
        elif r > 1:
            sizes = {e} | {e // d for d in (2, 4) if e % d == 0 and (e // d) % r == 0}
        else:
            sizes = {1} if e > 1 else {e}
        options.append(sorted(sizes))
    return [tuple(c) for c in itertools.product(*options)]


def predict_matrix(space: IterSpace, hw: HardwareModel, state: EtirState) -> Breakdown:
    """Predicted seconds of a matrix state (the module's model), as the vector model's Breakdown."""
    widths = {o.dtype_bytes for o in space.operands}
    kind = "bfloat16" if widths == {2} else "int8"
    shape = matrix_shape(space, kind)
    hz = hw.peak_flops_1t / max(1, hw.fma_units * hw.simd_lanes_fp32 * 2)
    tasks = parallel_tasks(space, state)
    cores = min(hw.cores, tasks)
    if shape is None:
        return Breakdown(math.inf, math.inf, math.inf, 0.0, cores, 1.0, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    element = 2 if kind == "bfloat16" else 1
    v = space.vec_axis
    nr = state.reg[v]
    col_tiles = nr // TILE_ROWS
    rows = math.prod(state.reg[a] for a in shape.rows) if shape.rows else 1
    k_total = math.prod(space.reduce)
    steps = k_total / shape.depth
    compute = steps * col_tiles * rows * ROW_CYCLES
    a_panel = rows * k_total * element
    b_panel_task = state.l2[v] * k_total * element
    a_bw = L1_BYTES_PER_CYCLE if a_panel <= 0.5 * hw.l1d_bytes else L2_BYTES_PER_CYCLE
    b_bw = L2_BYTES_PER_CYCLE if b_panel_task + a_panel <= CAPACITY_FRACTION * hw.l2_bytes else L3_BYTES_PER_CYCLE
    loads = steps * (rows * shape.depth * element / a_bw + col_tiles * TILE_ROWS * TILE_ROW_BYTES / b_bw)
    epilogue = rows * nr / TILE_ROWS * 2
    tile_cycles = max(compute, loads) + TILE_FIXED_CYCLES + epilogue
    tiles_per_task = math.prod(state.l2[a] // state.reg[a] for a in range(space.num_spatial))
    # b's panel is copied per task when the kernel packs it (a compiled model packs weights once)
    copy = b_panel_task / L2_BYTES_PER_CYCLE
    task_cycles = tiles_per_task * tile_cycles + TASK_FIXED_CYCLES + copy
    rounds = math.ceil(tasks / hw.cores)
    seconds = rounds * task_cycles / hz + PARALLEL_OVERHEAD_S
    imbalance = rounds / (tasks / hw.cores) if tasks >= hw.cores else 1.0
    t_comp = rounds * tiles_per_task * compute / hz
    return Breakdown(seconds, t_comp, rounds * tiles_per_task * loads / hz, compute / tile_cycles, cores, imbalance,
                     (0.0, 0.0, 0.0), (0.0, float(a_panel), float(b_panel_task)))


__all__ = ["MatrixShape", "fits_tiles", "matrix_kind", "matrix_shape", "matrix_states", "predict_matrix"]
