"""use_matrix_tiles: a register tile's reduction nest that a CPU's matrix unit can compute becomes
one TileProduct (loop/ir.py): AMX's tdpbf16ps for bfloat16 x bfloat16 -> float32, tdpbusd for
uint8 x int8 -> int32, where the target has them (target.has_matrix_tiles); anywhere else, and for
any nest it does not take, the IR is left as it is (the vector micro-kernel, correct everywhere).

    for k_0 in range(24):                    # reduction loops: each a step of the nest
      for k_1 in range(16):                  # K groups of one step (tile rows of b)
        for k_2 in range(2):                 # one group (a's contiguous pair, b's vnni pair)
          for i_1 in range(32):              # rows (a's rows, in tiles of at most 16)
            for j_1 in range(2):             # columns (16 to a tile), contiguous in acc
              for j_2 in range(16) vectorized:
                acc[i_1*32 + j_1*16 + j_2] = acc[..] + float32(A[(i0*32 + i_1)*768 + k_0*32 + k_1*2 + k_2])
                                                     * float32(B[k_0*1024 + k_1*64 + (j_1*16 + j_2)*2 + k_2])
==>
    tile_product(acc[0, ld 32] += A[i0*24576, ld 768, rows 16@0, 16@12288]
                 . B[0, ld 64, groups of 2], 32 x 32 x 32, steps 24(a+32, b+1024))

The nest is taken from its outermost reduction loop (acc's index does not use it) down to one
update `acc[c] = acc[c] + widen(a[ia]) * widen(b[ib])` with every index affine in the nest's
variables. Its loops must be: reduction loops first (any number: the steps; acc not indexed by
them), then row loops (b not indexed: one, or two whose rows follow each other in acc) and column
loops (a not indexed: acc's columns contiguous, b's `group` elements per column). Among the
reduction loops, one walks a group (a's and b's index +1, extent `group`) and one the groups
(a's index + group): they make a step's depth; a step deeper than a tile row (64 bytes) is split
into further steps. The tiles must fit the unit's 8 tile registers (`a_registers`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from tilegraph import dtype as dt
from tilegraph.errors import TilegraphError
from tilegraph.loop.edit import stmt_with_children
from tilegraph.loop.ir import BufferStore, For, Func, Seq, Stmt, TileProduct
from tilegraph.loop.visit import stmt_children, walk_stmts
from tilegraph.lower.passes.common import all_buffers
from tilegraph.target import has_matrix_tiles
from tilegraph.te.arith import linear_in
from tilegraph.te.expr import BinOp, BufferLoad, Cast, Const, Expr
from tilegraph.te.simplify import simplify

TILE_ROWS = 16          # rows of a tile register
TILE_ROW_BYTES = 64     # bytes of a tile register's row
TILE_REGISTERS = 8
MAX_ZEROED = 1 << 16  # accumulators a zeroing nest may cover to be compared with a tile product's
# (acc, a, b) dtypes a matrix unit multiplies, keyed by the name target.has_matrix_tiles takes
PRODUCTS = {"bfloat16": (dt.float32, (dt.bfloat16,), (dt.bfloat16,)), "int8": (dt.int32, (dt.uint8,), (dt.int8,))}
GROUPS = {"bfloat16": 2, "int8": 4}  # reduction elements per 32-bit lane of a tile (its K grouping)


def run(func: Func, target: object) -> Func:
    kinds = [k for k in PRODUCTS if any(b.dtype in PRODUCTS[k][2] for b in all_buffers(func)) and has_matrix_tiles(target, k)]
    if not kinds:
        return func

    return replace(func, body=_outermost_first(func.body, kinds))


def makes_tile_products(func: Func, target: object) -> bool:
    """Whether lowering the scheduled `func` for `target` computes a register tile on the matrix
    unit (False where lowering fails: such a schedule makes no tile product either)."""
    from tilegraph.lower.pipeline import lower

    if not any(has_matrix_tiles(target, k) for k in PRODUCTS):
        return False
    try:
        lowered = lower(func, target)
    except TilegraphError:
        return False
    return any(isinstance(x, TileProduct) for x in walk_stmts(lowered.body))


def _outermost_first(s: Stmt, kinds: list[str]) -> Stmt:
    """`s` with each nest taken from its outermost reduction loop (top down: an inner loop of a
    taken nest would make a tile product that keeps the outer steps as loops), and the
    accumulators' zeroing right before a tile product folded into it (`zero`)."""
    if isinstance(s, For):
        found = tile_product(s, kinds)
        if found is not None:
            return found
    kids = stmt_children(s)
    new = tuple(_outermost_first(k, kinds) for k in kids)
    if isinstance(s, Seq):
        new = _fold_zeroing(new)
    return s if len(new) == len(kids) and all(x is y for x, y in zip(new, kids)) else stmt_with_children(s, new)


def _fold_zeroing(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """A nest storing 0 to exactly a tile product's accumulators, right before it, dropped and
    the product made `zero` (tilezero instead of zeroing memory and loading it into the tiles):

        for i_init: for j_init: acc[i_init*32 + j_init] = 0.0f      ==>   tile_product(acc[0, ld 32] = ...)
        tile_product(acc[0, ld 32] += ...)
    """
    out: list[Stmt] = []
    for s in stmts:
        if isinstance(s, TileProduct) and not s.zero and out and _zeroes(out[-1], s):
            out[-1] = replace(s, zero=True)
            continue
        out.append(s)
    return tuple(out)


def _zeroes(s: Stmt, tile: TileProduct) -> bool:
    """Whether `s` is a loop nest storing 0 to every accumulator of `tile` and nothing else."""
    loops: list[For] = []
    while isinstance(s, For) or (isinstance(s, Seq) and len(s.stmts) == 1):
        if isinstance(s, For):
            loops.append(s)
        s = s.body if isinstance(s, For) else s.stmts[0]
    if not (isinstance(s, BufferStore) and s.buffer == tile.acc and isinstance(s.value, Const)
            and s.value.value == 0 and len(s.indices) == 1) or math.prod(lp.extent for lp in loops) > MAX_ZEROED:
        return False
    index = s.indices[0]
    coefficients = []
    for lp in loops:
        found = linear_in(index, lp.var)
        if found is None:
            return False
        coefficients.append(found[0])
        index = found[1]
    if simplify(index) != simplify(tile.acc_at):
        return False
    written = {0}
    for lp, c in zip(loops, coefficients):
        written = {w + c * v for w in written for v in range(lp.extent)}
    return written == {m * tile.acc_ld + n for m in range(tile.rows) for n in range(tile.cols)}


def tile_product(loop: For, kinds: list[str]) -> TileProduct | None:
    """The TileProduct computing the nest under `loop` (its outermost reduction loop), or None."""
    chain: list[For] = []
    s: Stmt = loop
    while isinstance(s, For) or (isinstance(s, Seq) and len(s.stmts) == 1):
        if isinstance(s, Seq):
            s = s.stmts[0]
            continue
        if s.kind not in ("serial", "unrolled", "vectorized"):
            return None
        chain.append(s)
        s = s.body
    update = _update(s, kinds)
    if update is None:
        return None
    store, a, b, kind = update
    coefficients = {}
    bases: list[Expr] = [store.indices[0], a.indices[0], b.indices[0]]
    for lp in chain:
        found = [linear_in(e, lp.var) for e in bases]
        if any(f is None for f in found):
            return None
        coefficients[lp.var.name] = tuple(f[0] for f in found)  # type: ignore[index]
        bases = [f[1] for f in found]  # type: ignore[index]
    return _tiles(chain, coefficients, [simplify(e) for e in bases], store, a, b, kind)


def _update(s: Stmt, kinds: list[str]) -> tuple[BufferStore, BufferLoad, BufferLoad, str] | None:
    """(store, a, b, kind) when `s` is `acc[c] = acc[c] + widen(a[ia]) * widen(b[ib])` (either order)."""
    if not (isinstance(s, BufferStore) and len(s.indices) == 1 and isinstance(s.value, BinOp) and s.value.op == "add"):
        return None
    for kind in kinds:
        acc_dtype, a_dtypes, b_dtypes = PRODUCTS[kind]
        if s.buffer.dtype != acc_dtype:
            continue
        for acc, product in ((s.value.a, s.value.b), (s.value.b, s.value.a)):
            if acc != BufferLoad(s.buffer, s.indices) or not (isinstance(product, BinOp) and product.op == "mul"):
                continue
            for x, y in ((product.a, product.b), (product.b, product.a)):
                a, b = _widened(x, acc_dtype, a_dtypes), _widened(y, acc_dtype, b_dtypes)
                if a is not None and b is not None:
                    return s, a, b, kind
    return None


def _widened(e: Expr, to: dt.DType, dtypes: tuple) -> BufferLoad | None:
    if isinstance(e, Cast) and e.dtype == to and isinstance(e.value, BufferLoad) and e.value.buffer.dtype in dtypes \
            and len(e.value.indices) == 1 and e.value.indices[0].dtype.lanes == 1:
        return e.value
    return None


def _tiles(chain: list[For], coefficients: dict[str, tuple[int, int, int]], bases: list[Expr],
           store: BufferStore, a: BufferLoad, b: BufferLoad, kind: str) -> TileProduct | None:
    group = GROUPS[kind]
    reduce = [lp for lp in chain if coefficients[lp.var.name][0] == 0]
    spatial = [lp for lp in chain if coefficients[lp.var.name][0] != 0]
    if not reduce or chain[: len(reduce)] != reduce:  # reduction loops first, then the tile's own
        return None
    rows = [lp for lp in spatial if coefficients[lp.var.name][2] == 0 and coefficients[lp.var.name][1] != 0]
    cols = [lp for lp in spatial if coefficients[lp.var.name][1] == 0 and coefficients[lp.var.name][2] != 0]
    if len(rows) + len(cols) != len(spatial) or not cols or len(rows) > 2:
        return None
    columns = _columns(cols, coefficients, group)
    grouping = _depth(reduce, coefficients, group, a.buffer.dtype.bits // 8)
    tiles = _row_tiles(rows, coefficients)
    if columns is None or grouping is None or tiles is None:
        return None
    depth, b_ld, steps = grouping
    acc_ld, a_ld, a_tiles = tiles
    if a_registers(tuple(r for r, _ in a_tiles), -(-columns // TILE_ROWS)) is None:
        return None
    return TileProduct(store.buffer, bases[0], acc_ld, a.buffer, bases[1], a_ld, a_tiles, b.buffer, bases[2], b_ld,
                       columns, depth, group, steps)


def a_registers(rows: tuple[int, ...], col_tiles: int) -> tuple[int, ...] | None:
    """The tile register (counted from the first after the accumulators) each row tile of a is
    loaded into, or None when the tiles do not fit the unit's 8 registers: row tiles x column
    tiles accumulators, then a's registers, then one per column tile of b. Each row tile gets its
    own register while they fit; else the tiles of one row count share registers in turn (a
    register's shape is fixed by the configuration, so tiles of other row counts need their own):
    4 tiles of 16, 16, 16 and 1 rows by one column tile use a registers 0, 1, 0 and 2."""
    free = TILE_REGISTERS - len(rows) * col_tiles - col_tiles
    if free >= len(rows):
        return tuple(range(len(rows)))
    counts = list(dict.fromkeys(rows))
    if free < len(counts):
        return None
    # each row count one register, the spare ones to the most frequent count
    most = max(counts, key=rows.count)
    owned = {c: [n] for n, c in enumerate(counts)}
    owned[most] += list(range(len(counts), free))
    turn = {c: 0 for c in counts}
    out = []
    for r in rows:
        out.append(owned[r][turn[r] % len(owned[r])])
        turn[r] += 1
    return tuple(out)


def _columns(cols: list[For], coefficients: dict[str, tuple[int, int, int]], group: int) -> int | None:
    """How many columns the column loops enumerate: acc's index walks 0 .. n-1 (mixed radix, the
    innermost coefficient 1) and b's the same times `group` (each column's group together)."""
    span = 1
    for lp in sorted(cols, key=lambda x: coefficients[x.var.name][0]):
        c_acc, _, c_b = coefficients[lp.var.name]
        if c_acc != span or c_b != span * group:
            return None
        span *= lp.extent
    return span


def _depth(reduce: list[For], coefficients: dict[str, tuple[int, int, int]], group: int,
           element_bytes: int) -> tuple[int, int, tuple[tuple[int, int, int], ...]] | None:
    """(depth, b_ld, steps): the loop inside a group (a and b +1, extent `group`), the loop over
    groups (a + group, b + b_ld), and every other reduction loop as a step (outermost first); the
    groups loop split into further steps where a step would be deeper than a tile row."""
    inner = [lp for lp in reduce if coefficients[lp.var.name][1:] == (1, 1) and lp.extent == group]
    over = [lp for lp in reduce if coefficients[lp.var.name][1] == group and lp not in inner]
    if len(inner) != 1 or len(over) != 1:
        return None
    (groups,) = over
    b_ld = coefficients[groups.var.name][2]
    per_step = TILE_ROW_BYTES // (group * element_bytes)  # groups a tile row of a holds (and b's tile rows)
    depth_groups = groups.extent if groups.extent <= per_step else per_step
    if groups.extent % depth_groups:
        return None
    steps = []
    for lp in reduce:
        if lp is groups and groups.extent > depth_groups:
            steps.append((groups.extent // depth_groups, depth_groups * group, depth_groups * b_ld))
        elif lp not in (groups, inner[0]):
            _, c_a, c_b = coefficients[lp.var.name]
            steps.append((lp.extent, c_a, c_b))
    return depth_groups * group, b_ld, tuple(steps)


def _row_tiles(rows: list[For], coefficients: dict[str, tuple[int, int, int]]
               ) -> tuple[int, int, tuple[tuple[int, int], ...]] | None:
    """(acc_ld, a_ld, ((rows, a offset), ...)): the row loops' rows cut in tiles of at most 16,
    with one stride in a inside a tile; two row loops must follow each other in acc (the outer
    one's coefficient the inner one's extent times its coefficient). When they follow each other
    in a too (a 1x1 convolution's output rows and columns: x[h, w] one row of channels after
    another), their rows are one run, cut in tiles of 16 across the outer loop's steps."""
    if not rows:
        return 0, 0, ((1, 0),)
    inner = min(rows, key=lambda lp: coefficients[lp.var.name][0])
    outer = [lp for lp in rows if lp is not inner]
    acc_ld, a_ld, _ = coefficients[inner.var.name]
    if outer and coefficients[outer[0].var.name][0] != acc_ld * inner.extent:
        return None
    if outer and coefficients[outer[0].var.name][1] == a_ld * inner.extent:
        run = outer[0].extent * inner.extent
        return acc_ld, a_ld, tuple((min(TILE_ROWS, run - first), first * a_ld) for first in range(0, run, TILE_ROWS))
    tiles = []
    for o in range(outer[0].extent if outer else 1):
        start = o * coefficients[outer[0].var.name][1] if outer else 0
        for first in range(0, inner.extent, TILE_ROWS):
            tiles.append((min(TILE_ROWS, inner.extent - first), start + first * a_ld))
    return acc_ld, a_ld, tuple(tiles)


__all__ = ["GROUPS", "PRODUCTS", "a_registers", "makes_tile_products", "run", "tile_product"]
