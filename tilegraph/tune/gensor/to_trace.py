"""State -> Schedule: every ETIR state becomes a replayable program built from public primitives.

    sch = state_to_schedule(wl, space, state)      # tg.Schedule; sch.trace.to_json() stores it

Reuse-heavy anchors (matmul, batch_matmul, every conv as an implicit GEMM over output pixels x
output channels) get the register micro-kernel. For matmul C[i, j] += A[i, k] * B[k, j] with
reg=(4, 64), l1=(4, 64), l2=(64, 128), vec_width=16, parallel=2, pack=("B",):

    for i, j, k: block C                      becomes
    for i_0_j_0 in 16*8 parallel:                     # L2 blocks (fused outer loops)
      B_global[jo, k, jr] = B[k, j-panel]             # cache_read + compute_at: [l2_N // 64, K, 64] micro-panels
      for i_1 in 16: for j_1 in 2:                    # register tiles (L1 tiles when l1 > reg)
        C_local = 0                                   # cache_write: accumulators, kept in registers
        for k in 1024:                                # (k split again by `unroll`, unrolled)
          for i_3 in 4 unrolled: for j_3 in 4 unrolled: for j_4 in 16 vectorized:
            C_local[...] += A[...] * B_global[...]
        for ax0 in 4 unrolled: for ax1 in 4 unrolled: for ax1_i in 16 vectorized:
          C[...] = C_local[...]                       # reverse_compute_at: once per register tile

All reduce loops sit inside the register tile (the write-back may not follow a partial sum), so
`rstep` does not block the reduction in this family. A single elementwise epilogue (bias + bn +
relu) absorbs the write-back (compute_inline) and is computed on the register tile. Padding and
transpose producers are compute_inline'd first.

Plain anchors that reduce along a contiguous last dimension (softmax and layer_norm stages, reduce
ops, norm_bmn) become vector partial results: every such stage is computed at the output's row
loop when there is one, then split k -> (ko, ki = 8..64 lanes, wider as the state's `unroll` grows),
rfactor(ki) into a local `<stage>_rf` and vectorize ki; the stage itself sums the lanes per row:

    for row in rows parallel:                        # the output's row loop (or the stage's own rows)
      for ko: for ki vectorized: max_rf[ki] = max(max_rf[ki], x[row, ko*16 + ki])
      for ki_rf: max[row] = max(max[row], max_rf[ki_rf])
      ... expsum the same way ...; softmax[row, :] vectorized

A full reduction with too few rows for the cores (norm_bmn) also splits its outermost reduction
loop in REDUCTION_TASKS chunks and rfactors it, so the chunks run in parallel.

Other anchors (pooling, elementwise, other reductions) keep the blocked nest of the
ETIR docstring (outer | l1 | r_outer | reg | r_inner | micro). Their remaining blocks get the plain
policy: the final output's outer loops parallel, reduction stages computed at its row loop
(compute_at) when legal, innermost contiguous loops vectorized.
"""

from __future__ import annotations

from tilegraph.errors import ScheduleError
from tilegraph.loop.ir import BufferStore, For
from tilegraph.loop.visit import walk_stmts
from tilegraph.schedule.defaults import inline_producers
from tilegraph.schedule.primitives.cache_read import layout_in_groups
from tilegraph.schedule.primitives.common import get_block, get_loop
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.arith import affine
from tilegraph.te.expr import BufferLoad, Call
from tilegraph.te.visit import uses_var, walk
from tilegraph.te.workload import Workload
from tilegraph.tune.gensor.broadcast_panels import aliasing_broadcast_operands, spatial_dims_of, tile_rows_layout
from tilegraph.tune.gensor.state import EtirState, IterSpace, Operand, can_pack, pack_order

# loop-nest position of each level, outermost first
_BLOCKED_ORDER = ("outer", "l1", "r_outer", "reg", "r_inner", "r_unroll", "micro", "interleave", "vec")
PARALLEL_TASKS = 64  # fuse outer loops of plain blocks until there are this many parallel chunks
RF_LANES = 16  # partial results per vector of a rfactor'ed reduction (one AVX-512 vector, two AVX2 ones)
RF_MIN_LANES = 8
RF_MIN_STEPS = 16  # vector steps per row before a wider partial result pays for its final sum
RF_MAX_VECTORS = 4  # independent partial-result vectors per row (chosen by the state's unroll)
REDUCTION_TASKS = 16  # parallel chunks of a full reduction (too few rows to spread over the cores)
_MICRO_KERNEL_ORDER = ("outer", "l1", "reg", "r_outer", "r_inner", "r_unroll", "micro", "interleave", "vec")


def state_to_schedule(workload: Workload, space: IterSpace, state: EtirState) -> Schedule:
    """The schedule a state stands for; raises ScheduleError if a primitive refuses it."""
    sch = Schedule(workload)
    micro = uses_micro_kernel(space, state)
    _inline_stages(sch, workload, space, state, micro)
    if micro:
        _micro_kernel(sch, workload, space, state)
    elif _is_row_reduction(sch, space):
        _stages_at_rows(sch, workload, state.vec_width or 1)
        for name in _row_reduction_blocks(sch, workload):
            _rfactor_reduction(sch, name, state)
    else:
        _tile_blocked(sch, space, state)
        _stages_at_rows(sch, workload, state.vec_width or 1)
    _schedule_other_blocks(sch, workload, space, state.vec_width or 1)
    return sch


def state_to_trace_json(workload: Workload, space: IterSpace, state: EtirState) -> str:
    return state_to_schedule(workload, space, state).trace.to_json()


def uses_micro_kernel(space: IterSpace, state: EtirState) -> bool:
    """Whether the state is emitted as a register micro-kernel with local accumulators."""
    return space.kind == "reuse" and state.vec_axis >= 0


def _inline_stages(sch: Schedule, workload: Workload, space: IterSpace, state: EtirState, micro: bool) -> None:
    """Every spatial stage but the anchor and the outputs is inlined (the tuner tiles the anchor
    itself). With a micro-kernel, the padding of an operand the kernel broadcasts stays a separate
    copy (a guard per broadcast would sit in the micro-kernel), while the padding of an operand it
    loads as vectors along their contiguous axis is inlined: one guard per vector, uniform over
    its lanes, costs less than writing and re-reading a padded copy of the whole input (depthwise
    convolution, which streams its input once: DEP-2 1.36x faster on AVX2)."""
    inline_producers(sch, "all", keep={space.anchor}, keep_padding=micro, keep_costly=True)
    if not micro:
        return
    vector_loaded = {o.name for o in space.operands
                     if state.vec_width > 1 and o.contiguous_axis() == state.vec_axis}
    for name in _padding_stages(sch, workload):
        padded = {x.name for x in next(t for t in workload.computes if t.name == name).inputs}
        if padded and padded <= vector_loaded:
            _try(sch.compute_inline, name)


def _padding_stages(sch: Schedule, workload: Workload) -> list[str]:
    from tilegraph.schedule.defaults import is_padding

    present = set(sch.block_names())
    return [t.name for t in workload.computes if t.name in present and is_padding(get_block(sch.func, t.name))]


def _try(fn, *args) -> bool:  # noqa: ANN001
    try:
        fn(*args)
    except ScheduleError:
        return False
    return True


def _axis_levels(space: IterSpace, state: EtirState, axis: int) -> list[tuple[str, int]]:
    """(level, extent) of the loops an axis is split into, outermost first, extent-1 levels dropped."""
    e = space.extents[axis]
    if axis < space.num_spatial:
        reg, l1, l2 = state.reg[axis], state.l1[axis], state.l2[axis]
        levels = [("outer", -(-e // l2)), ("l1", l2 // l1), ("reg", l1 // reg)]
        if axis == state.vec_axis and state.vec_width > 1:
            levels += [("interleave", reg // state.vec_width), ("vec", state.vec_width)]
        else:
            levels += [("micro", reg)]
    else:
        r = axis - space.num_spatial
        step = state.rstep[r]
        unroll = state.unroll if r == len(state.rstep) - 1 else 1
        levels = [("r_outer", -(-e // step)), ("r_inner", step // unroll), ("r_unroll", unroll)]
    kept = [(lv, f) for lv, f in levels if f > 1]
    return kept or [(levels[0][0], 1)]


def _split_and_order(sch: Schedule, space: IterSpace, state: EtirState,
                     order: tuple[str, ...]) -> list[tuple[int, int, str, str]]:
    """Split every anchor loop into its levels and reorder; (rank, axis, level, loop) outermost first."""
    loops = sch.loops(space.anchor)
    if len(loops) != len(space.extents):
        raise ScheduleError(f"gensor: block {space.anchor} has {len(loops)} loops, expected {len(space.extents)}")
    placed: list[tuple[int, int, str, str]] = []
    for axis, loop in enumerate(loops):
        levels = _axis_levels(space, state, axis)
        real, e = get_loop(sch.func, loop).extent, space.extents[axis]
        if axis < space.num_spatial and real > e:
            # tiled for fewer than the loop runs (_tiled_extent: a batch of 1..8 tiled for one
            # image, the rows of batch*seq for one sequence). Where the state has one tile of the
            # axis and e divides the loop, the loop is split into real / e runs of e, each tiled
            # as the state says (its tail guarded within the run, as a static kernel of e is); the
            # runs loop inside the parallel and outer loops (each task's packed operands stay
            # outside them), serial, where their guard skips the runs past the batch. Else more
            # outer tiles cover the rest, the axis's outer loop as the state parallelises.
            if e <= state.l2[axis] and real % e == 0:
                inner = [lv for lv in levels if lv[0] != "outer"] if e > 1 else []
                runs, run = sch.split(loop, [real // e, e]) if inner else (loop, None)
                placed.append((order.index("l1"), axis, "l1", runs))
                if inner:
                    names = [run] if len(inner) == 1 else list(sch.split(run, [f for _, f in inner]))
                    placed += [(order.index(level), axis, level, name) for (level, _), name in zip(inner, names)]
                continue
            levels = [("outer", -(-real // state.l2[axis])), *(lv for lv in levels if lv[0] != "outer")]
        names = [loop] if len(levels) == 1 else list(sch.split(loop, [f for _, f in levels]))
        for (level, _), name in zip(levels, names):
            placed.append((order.index(level), axis, level, name))
    placed.sort(key=lambda t: (t[0], t[1]))
    names = [name for *_, name in placed]
    if len(names) > 1:
        sch.reorder(*names)
    return placed


def _parallelize(sch: Schedule, space: IterSpace, state: EtirState, placed: list[tuple[int, int, str, str]]) -> str | None:
    """Fuse the first `parallel` outer loops and run them in parallel; the loop, or None."""
    outer = [name for _, axis, level, name in placed if level == "outer" and axis < space.num_spatial
             and get_loop(sch.func, name).extent > 1]
    chosen = outer[: state.parallel]
    if not chosen:
        return None
    fused = chosen[0] if len(chosen) == 1 else sch.fuse(*chosen)
    sch.parallel(fused)
    return fused


def _annotate_micro(sch: Schedule, placed: list[tuple[int, int, str, str]]) -> None:
    for _, _, level, name in placed:
        if level == "vec":
            sch.vectorize(name)
        elif level in ("micro", "interleave", "r_unroll") and get_loop(sch.func, name).extent > 1:
            sch.unroll(name)


def _tile_blocked(sch: Schedule, space: IterSpace, state: EtirState) -> None:
    placed = _split_and_order(sch, space, state, _BLOCKED_ORDER)
    _parallelize(sch, space, state, placed)
    _annotate_micro(sch, placed)


# ----------------------------------------------------------------------------------------- micro-kernel


def _micro_kernel(sch: Schedule, workload: Workload, space: IterSpace, state: EtirState) -> None:
    placed = _split_and_order(sch, space, state, _MICRO_KERNEL_ORDER)
    fused = _parallelize(sch, space, state, placed)
    _annotate_micro(sch, placed)
    spatial = [(level, name) for _, axis, level, name in placed if axis < space.num_spatial]
    fused_list = [fused] if fused else []
    tile_loop = _innermost_existing(sch, space.anchor, [*fused_list, *(n for lv, n in spatial if lv in ("outer", "l1", "reg"))])
    task_loop = _innermost_existing(sch, space.anchor, [*fused_list, *(n for lv, n in spatial if lv == "outer")])

    wb = sch.cache_write(space.anchor, "local")
    epilogue = _absorb_epilogue(sch, workload, space, wb)
    if tile_loop is not None:
        sch.reverse_compute_at(epilogue, tile_loop)
    _vectorize_tile_nest(sch, epilogue, state.vec_width)

    for operand in state.pack:
        if not can_pack(space, state, operand):
            continue
        op = next(o for o in space.operands if o.name == operand)
        copy = sch.cache_read(space.anchor, operand, "global", layout=packed_layout(space, state, op))
        if task_loop is not None:
            sch.compute_at(copy, task_loop)
        elif get_loop(sch.func, sch.loops(copy)[0]).extent > 1:
            sch.parallel(sch.loops(copy)[0])
        _vectorize_tile_nest(sch, copy, state.vec_width, unroll_outer=False)
    # one copy per call, before the tasks (a matrix unit loads its tile rows with a stride instead)
    for op in () if state.matrix else aliasing_broadcast_operands(space, state):
        copy = sch.cache_read(space.anchor, op.name, "global", layout=tile_rows_layout(space, state, op))
        spatial = len(spatial_dims_of(space, op))
        _parallel_copy(sch, sch.loops(copy), spatial, len(op.dims) - spatial)


def _parallel_copy(sch: Schedule, loops: list[str], spatial: int, reduce: int) -> None:
    """Order a tile-rows copy's loops as [spatial outer parts][tile rows][reduction] and run the
    spatial ones in parallel: each row is then read contiguously along the reduction (the channels),
    written with the tile's stride, and the reduction's index is a plain loop variable. Fused into
    the parallel loop (`_parallel_leading` fuses until PARALLEL_TASKS), the channel index was split
    back with a floordiv and floormod per element, and each of the tile's rows read one element
    at a time. ResNet-50's 1x1 convolution over 512 channels at 28 x 28 (2 threads, Xeon with
    AVX-512): 2.1-2.6 ms with the channels fused in, 1.0-1.4 so ordered, 0.9-1.2 with x read in place.

        for n, h/7, w/2 (parallel):            for n, h/7, w/2, c (fused, parallel):
          for h%7, w%2:                  was     for h%7, w%2:
            for c: x_global[.., c, h%7, w%2]       x_global[.., c, h%7, w%2] = x[n, h, w, c]
                     = x[n, h, w, c]
    """
    leading, rows, red = loops[:spatial], loops[spatial + reduce:], loops[spatial:spatial + reduce]
    if rows and red:
        sch.reorder(*leading, *rows, *red)
    if leading and _product(sch, leading) > 1:
        sch.parallel(sch.fuse(*leading) if len(leading) > 1 else leading[0])
    else:
        _parallel_leading(sch, [*leading, *rows, *red])


def packed_layout(space: IterSpace, state: EtirState, op: Operand) -> dict | None:
    """The layout of a packed copy of `op`: its dimension read along the vector axis moved last
    (`pack_order`), and with `state.dot_group` > 1 its dimension along the innermost reduction split
    in groups of that many elements, the group's part moved after it, so each column's group of
    reduction elements is contiguous: what one dot-product step reads (vpdpbusd's four bytes per
    int32 lane, vdpbf16ps's two bfloat16). B[K, N] with groups of 4 is copied as [K // 4, N, 4]:

        B_global[k // 4, j, k % 4] = B[k, j]       (k = 4 * kg + c: B_global[kg, ramp(j, 1, 16), c]
                                                    is ramp(base + c, 4, 16), the step's 64 bytes)
    """
    order = pack_order(op, state.vec_axis)
    grouped = _grouped_dim(space, state, op)
    if grouped is not None and state.matrix:
        panels = matrix_panel_layout(space, state, op, grouped)
        if panels is not None:
            return panels
    if grouped is not None:
        return layout_in_groups(len(op.dims), grouped, state.dot_group, list(order) if order else None)
    panels = micro_panel_layout(space, state, op)
    if panels is not None:
        return panels
    return {"order": list(order)} if order else None


def micro_panel_layout(space: IterSpace, state: EtirState, op: Operand) -> dict | None:
    """The layout that stores each register tile's columns of `op` as one contiguous micro-panel
    (BLIS's packed B): its dimension read along the vector axis split by the register tile's width
    `nr`, the outer part placed after the dimensions only spatial axes index, the inner part last,
    so the micro-kernel's loads walk the reduction through consecutive addresses. B[K, N] with a
    4 x 24 register tile is copied as [N // 24, K, 24]:

        B_global[j // 24, k, j % 24] = B[k, j]      (a step reads B_global[jo, k, 0:24]: 96 bytes
                                                     right after the previous step's)

    Read in place or copied as [K, N], the same step reads 96 bytes out of every row of N, which
    the prefetchers follow less well: a 4 x 24 tile of BERT's 128x768 . 768x3072 GEMM ran 66
    GFLOP/s from [K, 96] panels and 76 from [4, K, 24] on one Zen 3 core (6 x 16: 55 and 80).
    None when the tile is as wide as the dimension or does not divide it."""
    axis = state.vec_axis
    found = [d for d, dim in enumerate(op.dims) if dim is not None and len(dim) == 1 and dim[0] == (axis, 1)]
    if len(found) != 1 or axis < 0 or state.vec_width <= 1:
        return None
    (dim,) = found
    nr = state.reg[axis]
    if nr >= op.shape[dim] or op.shape[dim] % nr:
        return None

    def spatial_only(d: int) -> bool:
        terms = op.dims[d]
        return terms is not None and all(t[0] < space.num_spatial for t in terms)

    position = {d: d + (1 if d > dim else 0) for d in range(len(op.dims))}  # after the split: (outer, inner) at dim, dim + 1
    others = [d for d in range(len(op.dims)) if d != dim]
    order = ([position[d] for d in others if spatial_only(d)] + [dim]
             + [position[d] for d in others if not spatial_only(d)] + [dim + 1])
    return {"split": [[dim, nr]], "order": order}


def matrix_panel_layout(space: IterSpace, state: EtirState, op: Operand, grouped: int) -> dict | None:
    """The layout of a matrix unit's operand (b of a TileProduct): micro-panels of the register
    tile's `nr` columns (micro_panel_layout) whose reduction dimension `grouped` is stored in K
    groups, each column's group innermost: B[K, N] -> [N // nr, K // g, nr, g]; a convolution's
    w[kh, kw, ci, co] -> [co // nr, kh, kw, ci // g, nr, g]. A step's tile of 16 columns is then
    16 rows of 64 bytes, 2 * nr bytes apart, and the register tile's whole panel contiguous.
    None when the tile is as wide as the dimension or does not divide it."""
    axis = state.vec_axis
    found = [d for d, dim in enumerate(op.dims) if dim is not None and len(dim) == 1 and dim[0] == (axis, 1)]
    if len(found) != 1 or axis < 0 or found[0] == grouped:
        return None
    (dim,) = found
    nr = state.reg[axis]
    if nr >= op.shape[dim] or op.shape[dim] % nr:
        return None
    position: dict[tuple[int, str], int] = {}
    for d in range(len(op.dims)):
        for part in (("outer", "inner") if d in (dim, grouped) else ("whole",)):
            position[(d, part)] = len(position)

    def spatial_only(d: int) -> bool:
        terms = op.dims[d]
        return terms is not None and all(t[0] < space.num_spatial for t in terms)

    others = [d for d in range(len(op.dims)) if d not in (dim, grouped)]
    order = ([position[(d, "whole")] for d in others if spatial_only(d)] + [position[(dim, "outer")]]
             + [position[(d, "whole")] for d in others if not spatial_only(d)]
             + [position[(grouped, "outer")], position[(dim, "inner")], position[(grouped, "inner")]])
    return {"split": sorted([[dim, nr], [grouped, state.dot_group]]), "order": order}


def _grouped_dim(space: IterSpace, state: EtirState, op: Operand) -> int | None:
    """The dimension of `op` that the dot-product steps group: indexed by the last reduce axis alone
    (coefficient 1), which another operand reads contiguously (the broadcast A of the step), its
    extent and the reduction's unrolling divisible by the group (so every group's index folds to
    a constant offset). None when there is none or the state groups nothing."""
    group = state.dot_group
    if group <= 1 or not space.reduce or op.dtype_bytes * group > 4:  # the step's lane holds 4 bytes
        return None
    axis = space.num_spatial + len(space.reduce) - 1
    if state.unroll % group and state.unroll != 1:
        return None
    if not any(o.name != op.name and o.contiguous_axis() == axis for o in space.operands):
        return None
    found = [d for d, dim in enumerate(op.dims) if dim is not None and len(dim) == 1 and dim[0] == (axis, 1)
             and op.shape[d] % group == 0]
    return found[0] if len(found) == 1 else None


def _innermost_existing(sch: Schedule, block: str, candidates: list[str]) -> str | None:
    above = set(sch.loops(block))
    present = [name for name in candidates if name in above]
    if not present:
        return None
    order = list(sch.loops(block))
    return max(present, key=order.index)


def _absorb_epilogue(sch: Schedule, workload: Workload, space: IterSpace, wb: str) -> str:
    """When the anchor's only reader is one elementwise output stage, inline the write-back into it
    so the epilogue reads the accumulators directly; returns the block that follows the tile."""
    readers = [t for t in workload.computes if any(x.name == space.anchor for x in t.inputs)]
    if len(readers) != 1 or readers[0].op.reduce_axes or readers[0].name not in sch.block_names():
        return wb
    if readers[0].shape != next(t.shape for t in workload.computes if t.name == space.anchor):
        return wb
    return readers[0].name if _try(sch.compute_inline, wb) else wb


def _vectorize_tile_nest(sch: Schedule, block: str, vec_width: int, unroll_outer: bool = True,
                         tail: bool = False) -> None:
    """Own loops of a copy / write-back block that sits on a tile: innermost split by the vector
    width and vectorized, the others unrolled (so local accumulators are full constant vectors).
    With `tail`, an extent the width does not divide is vectorized too (full vectors, then one
    guarded tail: a row of 159 runs 9 vectors and a tail instead of 159 scalar steps)."""
    own = _own_loops(sch, block)
    if not own:
        return
    inner = own[-1]
    extent = get_loop(sch.func, inner).extent
    width = vec_width if vec_width > 1 and (extent % vec_width == 0 or (tail and extent > vec_width)) else 0
    rest = own[:-1]
    if width and extent > width:
        outer_part, inner = sch.split(inner, [None, width])
        rest = [*rest, outer_part]
    if width:
        sch.vectorize(inner)
    if unroll_outer:
        for name in rest:
            if get_loop(sch.func, name).extent > 1:
                sch.unroll(name)
    elif rest and width and get_loop(sch.func, rest[-1]).extent <= 8:
        sch.unroll(rest[-1])


def _own_loops(sch: Schedule, block: str) -> list[str]:
    """The loops directly generated for `block` (those holding no other block)."""
    from tilegraph.loop.visit import blocks

    out = []
    for name in sch.loops(block):
        loop = get_loop(sch.func, name)
        if [b.name for b in blocks(loop.body)] == [block]:
            out.append(name)
    return out


# ----------------------------------------------------------------------------------------- reductions


def _is_row_reduction(sch: Schedule, space: IterSpace) -> bool:
    """A plain anchor that reduces along the contiguous last dimension of what it reads (softmax
    and normalisation stages, reduce ops, norms): it gets rfactor'ed vector partial results."""
    return space.kind == "plain" and space.has_reduce and _contiguous_inner_reduction(sch, space.anchor)


def _row_reduction_blocks(sch: Schedule, workload: Workload) -> list[str]:
    return [t.name for t in workload.computes
            if t.op.reduce_axes and t.name in sch.block_names() and _contiguous_inner_reduction(sch, t.name)]


def _contiguous_inner_reduction(sch: Schedule, block: str) -> bool:
    """The block's innermost loop drives a reduce variable that indexes some buffer's last
    dimension with stride 1."""
    loops = sch.loops(block)
    if not loops:
        return False
    blk = get_block(sch.func, block)
    innermost = get_loop(sch.func, loops[-1]).var
    driven = [iv.var for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce" and b == innermost]
    if len(driven) != 1:
        return False
    loads = [e for st in walk_stmts(blk.body) if isinstance(st, BufferStore) for e in walk(st.value)
             if isinstance(e, BufferLoad) and e.indices]
    return any(affine(e.indices[-1], through_casts=True)[0].get(driven[0]) == 1 for e in loads)


def _rfactor_width(state: EtirState, inner_extent: int, work: int) -> int:
    """Partial results per row (`work` elements reduced into them): whole vectors, more of them
    (independent accumulation chains) as the state's `unroll` grows; 0 when the loop is too short."""
    width = RF_LANES * max(1, min(state.unroll, RF_MAX_VECTORS))
    while width > RF_MIN_LANES and (width > inner_extent or width * RF_MIN_STEPS > work):
        width //= 2  # the final sum of the partial results is a serial chain: keep it short
    return width if width <= inner_extent else 0


def _rfactor_reduction(sch: Schedule, block: str, state: EtirState) -> None:
    """split k -> (ko, ki = lanes) + rfactor(ki) + vectorize(ki): the reduction runs as vector partial
    results, the original block sums them per row. A block with its own nest runs its rows in
    parallel; with too few rows for the cores (a full reduction) the outermost reduction loop is
    split in REDUCTION_TASKS chunks and rfactor'ed as well, so the chunks run in parallel."""
    blk = get_block(sch.func, block)
    reduce_binds = [b for iv, b in zip(blk.iter_vars, blk.bindings) if iv.kind == "reduce"]
    own = _own_loops(sch, block)
    standalone = len(own) == len(sch.loops(block))
    red_loops = [n for n in own if any(uses_var(b, get_loop(sch.func, n).var) for b in reduce_binds)]
    spatial = [n for n in own if n not in red_loops]
    inner_extent = get_loop(sch.func, red_loops[-1]).extent
    rows = _product(sch, spatial)
    work = _product(sch, red_loops)
    split_chunks = standalone and rows < PARALLEL_TASKS // 4 and work >= REDUCTION_TASKS * RF_LANES * RF_MIN_STEPS
    width = _rfactor_width(state, inner_extent, work // REDUCTION_TASKS if split_chunks else work)
    if not width:
        return
    if split_chunks:
        if len(red_loops) == 1:
            chunk, _, lanes = sch.split(red_loops[0], [REDUCTION_TASKS, None, width])
        else:
            chunk, _ = sch.split(red_loops[0], [REDUCTION_TASKS, None])
            _, lanes = sch.split(red_loops[-1], [None, width])
        partial = sch.rfactor(block, chunk)
        sch.rfactor(partial, lanes, "local")
        sch.vectorize(lanes)
        sch.parallel(chunk)
        return
    if standalone:
        _parallel_leading(sch, spatial)
    _, lanes = sch.split(red_loops[-1], [None, width])
    sch.rfactor(block, lanes, "local")
    sch.vectorize(lanes)


def _parallel_leading(sch: Schedule, loops: list[str]) -> None:
    leading: list[str] = []
    for name in loops:
        if leading and not _directly_nested(sch, leading[-1], name):
            break
        leading.append(name)
        if _product(sch, leading) >= PARALLEL_TASKS:
            break
    if leading and _product(sch, leading) > 1:
        sch.parallel(sch.fuse(*leading) if len(leading) > 1 else leading[0])


# ----------------------------------------------------------------------------------------- other blocks


def _stages_at_rows(sch: Schedule, workload: Workload, vec_width: int = 1) -> None:
    """Multi-stage row operators (softmax, normalisations): compute every stage left as a block
    (the reductions, and a math stage kept to be computed once, such as softmax's exp) at the
    output's row loop, so one parallel loop over rows runs all stages while the row is in cache."""
    outputs = [t for t in workload.outputs if not t.op.reduce_axes]
    stages = [t for t in workload.computes if t not in workload.outputs and t.name in sch.block_names()
              and (t.op.reduce_axes or any(isinstance(e, Call) for e in walk(t.op.body)))]
    if len(outputs) != 1 or not stages or outputs[0].name not in sch.block_names():
        return
    loops = sch.loops(outputs[0].name)
    if len(loops) < 2:
        return
    row = loops[-2]
    for t in reversed(stages):
        if t.name in sch.block_names() and _try(sch.compute_at, t.name, row) and not t.op.reduce_axes:
            _try(_vectorize_tile_nest, sch, t.name, vec_width, False, True)  # its row, a vector at a time


def _schedule_other_blocks(sch: Schedule, workload: Workload, space: IterSpace, vec_width: int) -> None:
    remaining = [t for t in workload.computes if t.name != space.anchor and t.name in sch.block_names()]
    for t in reversed(remaining):  # consumers first: stages computed at their loops follow them
        if t.name not in sch.block_names() or _already_scheduled(sch, t.name):
            continue
        plain_block_policy(sch, t.name, len(t.op.axes), vec_width)


def _already_scheduled(sch: Schedule, block: str) -> bool:
    return any(get_loop(sch.func, name).kind != "serial" for name in sch.loops(block))


def plain_block_policy(sch: Schedule, block: str, num_spatial: int, vec_width: int) -> None:
    """Roller's plain policy for a block outside the search: parallel outer, vectorize inner spatial."""
    loops = list(sch.loops(block))
    if num_spatial == 0 or len(loops) < num_spatial:
        return
    spatial = loops[:num_spatial]
    innermost = get_loop(sch.func, spatial[-1])
    if len(loops) == num_spatial and vec_width > 1 and innermost.extent > 1:
        last = spatial[-1]
        if innermost.extent > vec_width:
            outer_part, inner = sch.split(last, [None, vec_width])
            spatial = [*spatial[:-1], outer_part]
        else:
            inner, spatial = last, spatial[:-1]
        sch.vectorize(inner)
    leading: list[str] = []
    for name in spatial:
        if get_loop(sch.func, name).kind != "serial":
            break
        if leading and not _directly_nested(sch, leading[-1], name):
            break  # other stages sit between the loops (computed at the row loop): fuse stops here
        leading.append(name)
        if _product(sch, leading) >= PARALLEL_TASKS:
            break
    while leading and get_loop(sch.func, leading[-1]).extent == 1 and len(leading) > 1:
        leading.pop()
    if not leading or _product(sch, leading) == 1:
        return
    sch.parallel(sch.fuse(*leading) if len(leading) > 1 else leading[0])


def _directly_nested(sch: Schedule, outer: str, inner: str) -> bool:
    body = get_loop(sch.func, outer).body
    return isinstance(body, For) and body.var.name == inner


def _product(sch: Schedule, loops: list[str]) -> int:
    n = 1
    for name in loops:
        n *= get_loop(sch.func, name).extent
    return n


__all__ = ["plain_block_policy", "state_to_schedule", "state_to_trace_json", "uses_micro_kernel"]
