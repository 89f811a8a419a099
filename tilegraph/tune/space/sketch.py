"""Sketches: Ansor's derivation rules over tilegraph's public primitives, with sampled decisions.

    sch = apply_sketch(wl, "multi_level_tiling", Decider(rng))     # one random program of the sketch
    sketches_for(wl)                                                # the CPU sketches that apply
    space_for(wl, target)                                           # the target kind's sketches

A sketch is the high-level loop structure; every size and annotation in it is a decision
(`sample_tile` / `sample_categorical`), so a sketch plus a decision vector is one program and its
trace replays exactly. Two sketches, chosen by Ansor's predicates on the anchor block:

multi_level_tiling (HasDataReuse: matmul, convolutions; CPU "SSRSRS"), for C[i, j] += A[i, k] * B[k, j]:

    for i, j, k: C[i, j] += ...          becomes, with decisions i=[i0,i1,i2,i3] j=[...] k=[k0,k1]
    for i0_j0_fused parallel:            # parallel granularity: how many outer tiles are fused
      B_global = B[:, j-panel]           # optional pack (cache_read at the S0 tile), 8/16-bit B
                                         #   optionally in a dot step's K groups of 2 or 4
      for i1, j1:                        # write cache at level 1 or 2 (or none)
        for k0: for i2, j2: for k1: for i3: for j3 vectorized:  C_local[...] += ...
        for ax0, ax1 vectorized: C[...] = C_local[...]
    (loops below k0 unrolled while their trip count stays under the sampled auto-unroll limit
     {0, 16, 64, 512}; a fusible elementwise consumer takes the write cache's place)

plain (everything else: pooling, softmax, norms, elementwise): producers inlined (padding's
location is a decision), each remaining stage computed at a sampled loop of the output or at root,
reductions either split and unrolled or rfactor'ed into vector partial results (a decision), the
innermost spatial loop split and vectorized, outer loops fused and parallelised (a decision).

A decision that a primitive refuses (compute_at where it is illegal) leaves that step undone; the
program stays legal and the trace records what was applied.
"""

from __future__ import annotations

from collections.abc import Callable

from tilegraph.errors import ScheduleError
from tilegraph.loop.ir import Block, BufferStore, For
from tilegraph.loop.visit import loads_under, reduce_loop_of, walk_stmts
from tilegraph.runtime.backends import backend_for
from tilegraph.schedule.defaults import inline_producers, is_padding
from tilegraph.schedule.gpu_rows import is_row_operator
from tilegraph.schedule.primitives.cache_read import layout_in_groups
from tilegraph.schedule.primitives.common import get_block, get_loop
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.expr import Var
from tilegraph.te.visit import uses_var
from tilegraph.te.workload import Workload
from tilegraph.tune.gensor.state import IterSpace
from tilegraph.tune.space.decider import Decider
from tilegraph.tune.space.gpu_sketch import gpu_flat, gpu_multi_level_tiling, gpu_rows, gpu_tileable

SPATIAL_LEVELS = 4  # S S . S . S
REDUCE_LEVELS = 2  # . . R . R .
MAX_INNERMOST = 64  # Ansor's max_innermost_split_factor
# auto_unroll_max_step on CPU; Ansor adds 512, which here costs seconds of lowering and gcc per candidate
UNROLL_STEPS = (0, 16, 64)
MAX_VECTOR = 64


def sketches_for(workload: Workload) -> list[str]:
    """The CPU sketches whose predicate holds for the workload's anchor (at least one)."""
    space = IterSpace.from_workload(workload)
    return ["multi_level_tiling"] if space.kind == "reuse" else ["plain"]


def space_for(workload: Workload, target: Target | None = None) -> list[str]:
    """The design space of `workload` on `target`: the sketches of the target's kind that apply
    (CPU: Ansor's rules above; GPU: tune/space/gpu_sketch.py). Strategies sample and mutate these
    programs without asking what the target is."""
    if target is not None and backend_for(target).is_gpu:
        rows = ["gpu_rows"] if is_row_operator(workload) else []
        return [*rows, *(["gpu_multi_level_tiling"] if gpu_tileable(workload) else []), "gpu_flat"]
    return sketches_for(workload)


def apply_sketch(workload: Workload, sketch: str, decider: Decider) -> Schedule:
    """The program of `sketch` with the decider's decisions; raises ScheduleError if the sketch does not apply."""
    if sketch not in SKETCHES:
        raise ScheduleError(f"unknown sketch {sketch!r}; known: {sorted(SKETCHES)}")
    sch = Schedule(workload)
    SKETCHES[sketch](sch, workload, decider)
    return sch


# ------------------------------------------------------------------------------ helpers
def _try(fn: Callable[..., object], *args: object) -> bool:
    try:
        fn(*args)
        return True
    except ScheduleError:
        return False


def _extent(sch: Schedule, loop: str) -> int:
    return get_loop(sch.func, loop).extent


def _nested_prefix(sch: Schedule, loops: list[str]) -> list[str]:
    """The longest prefix of `loops` in which each loop is the whole body of the one before (fusable)."""
    out: list[str] = []
    for name in loops:
        if out:
            body = get_loop(sch.func, out[-1]).body
            if not (isinstance(body, For) and body.var.name == name):
                break
        if get_loop(sch.func, name).kind != "serial":
            break
        out.append(name)
    return out


def _parallelize(sch: Schedule, d: Decider, loops: list[str]) -> None:
    """Fuse a sampled number of the leading perfectly nested loops and run the result in parallel."""
    prefix = _nested_prefix(sch, loops)
    if not prefix:
        return
    count = d.categorical(sch, list(range(1, len(prefix) + 1)))
    chosen = prefix[:count]
    loop = sch.fuse(*chosen) if len(chosen) > 1 else chosen[0]
    if _extent(sch, loop) > 1:
        _try(sch.parallel, loop)


def _unroll_inner(sch: Schedule, loops: list[str], max_steps: int) -> None:
    """Unroll `loops` from the innermost outwards while their total trip count stays <= max_steps."""
    steps = 1
    for name in reversed(loops):
        extent = _extent(sch, name)
        if extent == 1:
            continue
        if steps * extent > max_steps:
            break
        if _try(sch.unroll, name):
            steps *= extent


def _own_loops(sch: Schedule, block: str) -> list[str]:
    """The loops above `block` whose body holds no other block (the block's own nest)."""
    names = sch.loops(block)
    own: list[str] = []
    for name in reversed(names):
        others = [s for s in walk_stmts(get_loop(sch.func, name).body) if isinstance(s, Block) and s.name != block]
        if others:
            break
        own.insert(0, name)
    return own


def _is_reduce_loop(sch: Schedule, loop: str) -> bool:
    return bool(reduce_loop_of(get_loop(sch.func, loop)))


def _stores_contiguously_along(sch: Schedule, block: str, loop: str) -> bool:
    """Whether the block's store index uses `loop` in its last dimension only (a vector store)."""
    blk = get_block(sch.func, block)
    var = get_loop(sch.func, loop).var
    binding = {iv.var.name: b for iv, b in zip(blk.iter_vars, blk.bindings)}
    stores = [s for s in walk_stmts(blk.body) if isinstance(s, BufferStore)]
    if not stores or not stores[0].indices:
        return False
    dims_using = []
    for d, ix in enumerate(stores[0].indices):
        names = {v for v in binding if uses_var(ix, _var(blk, v))}
        if any(uses_var(binding[n], var) for n in names):
            dims_using.append(d)
    return dims_using == [len(stores[0].indices) - 1]


def _var(blk: Block, name: str) -> Var:
    return next(iv.var for iv in blk.iter_vars if iv.var.name == name)


# ------------------------------------------------------------------------------ multi-level tiling
def multi_level_tiling(sch: Schedule, workload: Workload, d: Decider) -> None:
    space = IterSpace.from_workload(workload)
    anchor = space.anchor
    inline_producers(sch, "all", keep={anchor}, keep_padding=True, keep_costly=True)
    for name in [b for b in sch.block_names() if b != anchor and is_padding(get_block(sch.func, b))]:
        if d.categorical(sch, [0, 1]) == 0:  # padding's compute location: inline (guarded loads) or root
            _try(sch.compute_inline, name)

    spatial_levels: list[list[str]] = [[] for _ in range(SPATIAL_LEVELS)]
    reduce_levels: list[list[str]] = [[] for _ in range(REDUCE_LEVELS)]
    unit_spatial: list[str] = []
    unit_reduce: list[str] = []
    last_axis_inner: str | None = None
    innermost_reduce = 1  # the trip count of the last reduce axis's innermost part
    loops = list(sch.loops(anchor))
    for index, name in enumerate(loops):
        reducing = _is_reduce_loop(sch, name)
        if _extent(sch, name) == 1:
            (unit_reduce if reducing else unit_spatial).append(name)
            innermost_reduce = 1 if reducing else innermost_reduce
            continue
        levels = reduce_levels if reducing else spatial_levels
        factors = d.tile(sch, name, len(levels), MAX_INNERMOST)
        parts = sch.split(name, list(factors))
        for level, part in zip(levels, parts):
            level.append(part)
        if not reducing and index == space.num_spatial - 1:
            last_axis_inner = parts[-1]
        if reducing:
            innermost_reduce = _extent(sch, parts[-1])
    s0, s1, s2, s3 = spatial_levels
    r0, r1 = reduce_levels
    order = [*unit_spatial, *s0, *s1, *unit_reduce, *r0, *s2, *r1, *s3]
    if len(order) > 1:
        sch.reorder(*order)

    # write cache / consumer fusion at spatial tile level 1 or 2 (0: the anchor stores directly)
    level = d.categorical(sch, [0, 1, 2])
    outer = [*unit_spatial, *s0, *s1]
    attach = {1: [*unit_spatial, *s0], 2: outer}.get(level, [])
    if attach:
        consumer = _fusible_consumer(sch, workload, anchor)
        if consumer is not None:
            _try(sch.reverse_compute_at, consumer, attach[-1])
        elif anchor in {t.name for t in workload.outputs}:
            wb = sch.cache_write(anchor, "local")
            if _try(sch.reverse_compute_at, wb, attach[-1]):
                _vectorize_innermost(sch, wb)

    # pack each operand reused across an outer tile: a contiguous copy per S0 tile
    if s0 or unit_spatial:
        at = [*unit_spatial, *s0][-1]
        for buffer in _reused_operands(sch, anchor):
            grouped = _groupable_dim(sch, anchor, buffer, innermost_reduce)
            choice = d.categorical(sch, [0, 1, *(grouped[1] if grouped else ())])
            if choice:  # 1: a contiguous copy; 2 or 4: its K groups together (a dot step's operand)
                layout = layout_in_groups(grouped[0], grouped[2], choice) if choice > 1 else None
                copy = sch.cache_read(anchor, buffer, "global", layout=layout)
                if _try(sch.compute_at, copy, at):
                    _vectorize_innermost(sch, copy)

    if last_axis_inner is not None and _stores_contiguously_along(sch, anchor, last_axis_inner):
        _try(sch.vectorize, last_axis_inner)
    max_steps = UNROLL_STEPS[d.categorical(sch, list(range(len(UNROLL_STEPS))))]
    inner = [lp for lp in [*s2, *r1, *s3] if get_loop(sch.func, lp).kind == "serial"]
    _unroll_inner(sch, inner, max_steps)
    _parallelize(sch, d, outer)
    _schedule_rest(sch, workload, d, skip={anchor})


def _fusible_consumer(sch: Schedule, workload: Workload, anchor: str) -> str | None:
    """The one elementwise output block reading the anchor (HasFusibleConsumer), if any."""
    readers = [b for b in sch.block_names() if b != anchor
               and any(ld.buffer.name == anchor for ld in loads_under(get_block(sch.func, b).body))]
    if len(readers) != 1:
        return None
    blk = get_block(sch.func, readers[0])
    if any(iv.kind == "reduce" for iv in blk.iter_vars):
        return None
    return readers[0]


def _reused_operands(sch: Schedule, anchor: str) -> list[str]:
    """Buffers the anchor loads whose index misses one of its non-unit spatial loops."""
    blk = get_block(sch.func, anchor)
    spatial = [iv for iv in blk.iter_vars if iv.kind == "spatial" and iv.extent > 1]
    out: list[str] = []
    for ld in loads_under(blk.body):
        if ld.buffer.name in out or ld.buffer.name == anchor:
            continue
        if any(not any(uses_var(ix, iv.var) for ix in ld.indices) for iv in spatial):
            out.append(ld.buffer.name)
    return out


def _groupable_dim(sch: Schedule, anchor: str, buffer: str,
                   innermost_reduce: int) -> tuple[int, tuple[int, ...], int] | None:
    """(dimensions, group sizes, dim) when an 8- or 16-bit `buffer` has one dimension indexed by the
    anchor's last reduce variable alone, which a packed copy may store in the K groups of a
    dot-product step (groups of 2 or 4 bytes per int32 lane, tune/gensor/to_trace.py packed_layout):
    the groups dividing both that extent and the reduction's innermost trip count. The sketch does
    not ask the target which step it has; a group no step reads is measured and loses."""
    blk = get_block(sch.func, anchor)
    reduce_vars = [iv.var for iv in blk.iter_vars if iv.kind == "reduce"]
    load = next((ld for ld in loads_under(blk.body) if ld.buffer.name == buffer), None)
    if load is None or not reduce_vars:
        return None
    sizes = {8: (2, 4), 16: (2,)}.get(load.buffer.dtype.bits, ())
    dims = [d for d, ix in enumerate(load.indices) if isinstance(ix, Var) and ix.name == reduce_vars[-1].name]
    if not sizes or len(dims) != 1:
        return None
    extent = load.buffer.shape[dims[0]]
    groups = tuple(g for g in sizes if extent % g == 0 and innermost_reduce % g == 0)
    return (len(load.buffer.shape), groups, dims[0]) if groups else None


def _vectorize_innermost(sch: Schedule, block: str) -> None:
    loops = sch.loops(block)
    if loops and _extent(sch, loops[-1]) <= MAX_VECTOR and _stores_contiguously_along(sch, block, loops[-1]):
        _try(sch.vectorize, loops[-1])


# ------------------------------------------------------------------------------ plain
def plain(sch: Schedule, workload: Workload, d: Decider) -> None:
    inline_producers(sch, "all", keep_costly=True)
    _schedule_rest(sch, workload, d, skip=set())


def _schedule_rest(sch: Schedule, workload: Workload, d: Decider, skip: set[str]) -> None:
    """The plain rule for every block not in `skip`: compute location, tiling, annotations."""
    outputs = [t.name for t in workload.outputs if t.name in sch.block_names() and t.name not in skip]
    main = outputs[-1] if outputs else None
    main_loops = [lp for lp in _own_loops(sch, main) if not _is_reduce_loop(sch, lp)] if main else []
    stages = [t.name for t in reversed(workload.computes)
              if t.name in sch.block_names() and t.name not in skip and t.name not in outputs]
    for name in stages:  # consumers first: a stage computed at the output's loops joins its nest
        location = d.categorical(sch, list(range(len(main_loops) + 1))) if main_loops else 0
        if location > 0:  # 0: root; k: at the output's k-th loop
            _try(sch.compute_at, name, main_loops[location - 1])
    roots = []
    for name in [*outputs, *stages]:
        own = _own_loops(sch, name)
        spatial = [lp for lp in own if not _is_reduce_loop(sch, lp)]
        reduce = [lp for lp in own if _is_reduce_loop(sch, lp)]
        if reduce:
            _tile_reduction(sch, d, name, reduce)
        if spatial and _extent(sch, spatial[-1]) > 1 and _stores_contiguously_along(sch, name, spatial[-1]):
            _, lanes = sch.split(spatial[-1], list(d.tile(sch, spatial[-1], 2, MAX_VECTOR)))
            if not reduce:
                _try(sch.vectorize, lanes)
            elif d.categorical(sch, [0, 1]):  # a reduction: vectorize across its rows (strided loads) or not
                _try(_move_innermost_and_vectorize, sch, name, lanes)
        if len(own) == len(sch.loops(name)):
            roots.append(name)
    for name in roots:
        _parallelize(sch, d, [lp for lp in sch.loops(name) if not _is_reduce_loop(sch, lp)])


def _tile_reduction(sch: Schedule, d: Decider, block: str, reduce: list[str]) -> None:
    """The innermost reduction loop: rfactor'ed into vector partial results, or split and unrolled."""
    inner = reduce[-1]
    if _extent(sch, inner) < 8:
        return
    _, lanes = sch.split(inner, list(d.tile(sch, inner, 2, MAX_VECTOR)))
    if d.categorical(sch, [0, 1]) == 1 and _try(sch.rfactor, block, lanes, "local"):
        _try(sch.vectorize, lanes)
        return
    _unroll_inner(sch, [lanes], UNROLL_STEPS[d.categorical(sch, list(range(len(UNROLL_STEPS))))])


def _move_innermost_and_vectorize(sch: Schedule, block: str, loop: str) -> None:
    loops = [lp for lp in _own_loops(sch, block) if lp != loop]
    if loops:
        sch.reorder(*loops, loop)
    sch.vectorize(loop)


SKETCHES: dict[str, Callable[[Schedule, Workload, Decider], None]] = {
    "multi_level_tiling": multi_level_tiling,
    "plain": plain,
    "gpu_multi_level_tiling": gpu_multi_level_tiling,
    "gpu_flat": gpu_flat,
    "gpu_rows": gpu_rows,
}
