"""The schedule of a fused attention kernel (ops/attention.py): one parallel loop over blocks of
query rows, every stage computed at that block, so its scores never leave the cache.

    sch = attention_schedule(workload, target, rows=8)     # None when the workload has no attention

    for head in B (parallel; with too few heads for the cores, (head, i_outer) is the parallel loop):
      kt'[D, T]       = kt                           once per head (else inlined into qk's reads)
      for i_outer in S / rows:
        qk[rows, T]   = q[rows, :] @ kt'             for d: for ii, j (vector)     (kt' read along j)
        max[rows]     = max_j (qk * scale + mask)    vector partial maxima
        exp[rows, T]  = exp(x - max)                 for ii: for j (vector)
        expsum[rows]  = sum_j exp                    vector partial sums
        p[rows, T]    = exp / expsum                 for ii: for j (vector)
        out[rows, E]  = p @ v                        for j: for ii, e (vector), in registers
        epilogue rows (the transposes/reshapes the graph fused after it)

Prologue stages (the slices, reshapes, transposes and scalings that bring q, kt and v from the
projections' layout) are inlined into the reads. Built from public primitives only, so the trace
replays and the tuner measures it like any schedule; `rows` (query rows per block) is its decision
(Gensor proposes each of ATTENTION_ROWS for such a workload, tune/strategy/gensor.py).
Before: six loop nests over the whole (B, S, T) score tensor. After: the nest above.
"""

from __future__ import annotations

import math

from tilegraph.errors import ScheduleError
from tilegraph.loop.visit import blocks, find_loop
from tilegraph.schedule.defaults import inline_producers
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.tensor import Tensor
from tilegraph.te.workload import Workload

ATTENTION_ROWS = (1, 2, 4, 8, 16)  # query rows per block the tuner may choose among
DEFAULT_ROWS = 8
# accumulator vectors of a register tile by vector width. Measured on GPT-2's heads (AMD EPYC, 2
# threads, default 8 rows): AVX-512 (32 registers) 8 rows x 4 vectors (32, some spilled) 0.167 ms
# against 4 x 4 (16) 0.285 ms; the same code for AVX2 (16 registers, vectors of 8) 4 x 2 (8)
# 0.289 ms against 8 x 2 (16) 0.362 ms. NEON (4 lanes, 32 registers) is not measured.
ACCUMULATORS_PER_LANES = {16: 32, 8: 8, 4: 8}
PARALLEL_MIN_HEADS = 4  # batches x heads per core before the row blocks need not share the parallel loop
_STAGES = ("kt", "qk", "max", "exp", "expsum", "p", "out")


def attention_stages(workload: Workload) -> dict[str, Tensor] | None:
    """The seven stages of the workload's one attention operator by role, or None."""
    tagged = [t for t in workload.computes if t.op.tag == "attention"]
    if len(tagged) != len(_STAGES):
        return None
    stages = dict(zip(_STAGES, tagged))  # workload.computes is topological: the order ops/attention.py builds
    if not stages["qk"].op.reduce_axes or not stages["out"].op.reduce_axes:
        return None
    return stages


def is_attention(workload: Workload) -> bool:
    return attention_stages(workload) is not None


def attention_schedule(workload: Workload, target: Target | str = "cpu", rows: int = DEFAULT_ROWS) -> Schedule | None:
    """The blocked schedule above, or None when the workload holds no attention operator or a
    primitive refuses the nest (the caller keeps another schedule)."""
    stages = attention_stages(workload)
    if stages is None:
        return None
    target = target if isinstance(target, Target) else Target(target)
    lanes = target.lanes("float32") if target.kind == "cpu" else 1
    vectors = 4 if lanes >= 16 else 2  # rows x vectors accumulators beside the operands in 32 / 16 registers
    try:
        return _build(workload, stages, rows, lanes, vectors, max(1, target.num_cores or 1))
    except ScheduleError:
        return None


def _build(workload: Workload, stages: dict[str, Tensor], rows: int, lanes: int, vectors: int,
           cores: int) -> Schedule:
    sch = Schedule(workload)
    names = {role: t.name for role, t in stages.items()}
    inline_producers(sch, "all", keep=set(names.values()))
    out = names["out"]
    *batch, i, _, _ = sch.loops(out)
    rows = max(1, min(rows, stages["out"].shape[-2]))
    io, ii = sch.split(i, [None, rows]) if rows > 1 else (i, None)
    _register_product(sch, out, [ii] if ii else [], stages["out"].shape[-1], lanes, vectors)
    # parallel over the batches (heads) alone when they are enough: the row-block loop stays
    # serial inside, so no index divides a fused loop variable
    heads = math.prod(stages["out"].shape[:-2])
    per_head = None  # the loop over heads, when the row blocks run inside it
    if heads >= PARALLEL_MIN_HEADS * cores and batch:
        per_head = sch.fuse(*batch) if len(batch) > 1 else batch[0]
        sch.parallel(per_head)
        outer = io
    else:
        outer = sch.fuse(*batch, io) if batch else io
        sch.parallel(outer)
    consumers = [t for t in workload.computes if t.name in sch.block_names() and t.name not in names.values()]
    for t in consumers:  # epilogues (the transpose/reshape of the output) follow each row block
        sch.reverse_compute_at(t.name, outer)
    for role in ("p", "expsum", "exp", "max", "qk"):
        sch.compute_at(names[role], outer)
    for role in ("p", "exp"):
        _, j_vec = _vector_split(sch, sch.loops(names[role])[-1], stages[role].shape[-1], lanes)
        if j_vec:
            sch.vectorize(j_vec)
    for role in ("max", "expsum"):
        *_, rj = sch.loops(names[role])
        _, part = _vector_split(sch, rj, stages["qk"].shape[-1], lanes)
        if part:  # vector partial results: a chain of T/lanes dependent operations, not T
            sch.rfactor(names[role], part, "local")
            sch.vectorize(part)
    if per_head is not None:  # kt packed once per head, read contiguously by every row block
        sch.compute_at(names["kt"], per_head)
        _, kt_vec = _vector_split(sch, sch.loops(names["kt"])[-1], stages["kt"].shape[-1], lanes)
        if kt_vec:
            sch.vectorize(kt_vec)
    else:
        sch.compute_inline(names["kt"])
    qk_rows = sch.loops(names["qk"])[-3:-2] if rows > 1 else []  # the block's own row loop
    _register_product(sch, names["qk"], qk_rows, stages["qk"].shape[-1], lanes, vectors, write_back=False)
    return sch


def _register_product(sch: Schedule, block: str, own_rows: list[str], columns: int, lanes: int, vectors: int,
                      write_back: bool = True) -> None:
    """A product block (rows x columns, one reduction) as a register tile: its rows times `vectors`
    vectors of columns accumulate in registers over the whole reduction, then are written back.

        for c_outer: for r (reduction): for row (unrolled): for c_vec (unrolled): for lane (vector)
    """
    accumulators = ACCUMULATORS_PER_LANES.get(lanes, 8)
    loops = sch.loops(block)
    column, red = loops[-2], loops[-1]
    width = lanes
    while width > 1 and columns % width:
        width //= 2
    if width <= 1:
        return  # no vector divides the columns: the plain nest (correct, slower)
    count = max(1, min(vectors, columns // width))
    while (columns // width) % count:
        count -= 1
    c_outer, c_vec, lane = sch.split(column, [None, count, width])
    row_outer: list[str] = []
    reg_rows = list(own_rows)
    if own_rows:  # rows x count accumulators must fit the register file beside the operands
        budget = max(1, accumulators // count)
        extent = _extent(sch, own_rows[-1])
        if extent > budget:
            reg = max(d for d in range(1, budget + 1) if extent % d == 0)
            if reg < extent:
                r_outer, r_reg = sch.split(own_rows[-1], [None, reg])
                row_outer, reg_rows = [r_outer], [*own_rows[:-1], r_reg]
    sch.reorder(*row_outer, c_outer, red, *reg_rows, c_vec, lane)
    for name in (*reg_rows, c_vec):
        sch.unroll(name)
    sch.vectorize(lane)
    if not write_back:
        return  # a block computed at the row block already accumulates in a small local array
    wb = sch.cache_write(block, "local")
    sch.reverse_compute_at(wb, c_outer)
    wb_loops = _own(sch, wb)
    if wb_loops:
        *rest, last = wb_loops
        outer_part, wl = _vector_split(sch, last, count * width, lanes)
        if wl:
            sch.vectorize(wl)
        for name in (*rest, *([outer_part] if outer_part and outer_part != last else [])):
            sch.unroll(name)  # constant offsets: the local tile becomes vector registers


def _extent(sch: Schedule, loop: str) -> int:
    return find_loop(sch.func, loop).extent


def _own(sch: Schedule, block: str) -> list[str]:
    """The loops directly generated for `block` (those holding no other block)."""
    return [name for name in sch.loops(block) if [b.name for b in blocks(find_loop(sch.func, name).body)] == [block]]


def _vector_split(sch: Schedule, loop: str, extent: int, lanes: int) -> tuple[str | None, str | None]:
    """(outer, vector) loops of `loop` at the widest power-of-two width <= lanes dividing extent."""
    width = lanes
    while width > 1 and extent % width:
        width //= 2
    if width <= 1:
        return loop, None
    if width == extent:
        return None, loop
    outer, vec = sch.split(loop, [None, width])
    return outer, vec


__all__ = ["ATTENTION_ROWS", "DEFAULT_ROWS", "attention_schedule", "attention_stages", "is_attention"]
