"""ETIR: the program states of the Gensor construction graph (CPU mapping), and the iteration space
they tile.

    space = IterSpace.from_workload(wl)          # axes, extents, access patterns of the anchor block
    s = minimal_state(space, hw)                 # the smallest aligned program
    s.reg, s.l1, s.l2, s.rstep, s.interleave     # a frozen, hashable value: equal programs are one node

The loop nest a state stands for (to_trace.py builds it from public primitives), per spatial axis a
and reduce axis r, outermost first:

    for a.outer   in E_a / l2_a      (fused over the first `parallel` spatial axes -> parallel)
      for a.l1    in l2_a / l1_a     (L1 tiles of one per-core L2 block)
        for r.outer in E_r / rstep_r (k-blocks: the reduction chunk kept in L1)
          for a.reg in l1_a / reg_a  (register tiles of one L1 tile)
            for r.inner in rstep_r   (the last reduce axis split again by `unroll`, unrolled)
              for a.micro in reg_a   (unrolled; on the vector axis: interleave x vec_width, vectorized)

A level whose loop has extent 1 is not materialised. `interleave` = reg[vec_axis] / vec_width is the
number of independent accumulator vectors per row of the micro-tile: the CPU counterpart of the
GPU virtual-thread factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tilegraph.te.arith import affine
from tilegraph.te.dims import SMALLEST_BUCKET, dims_of, value_of
from tilegraph.te.expr import BinOp, Const, Expr, IterVar, Reduce, TensorRead, Var
from tilegraph.te.tensor import Tensor
from tilegraph.te.visit import rewrite, substitute, walk
from tilegraph.te.workload import Workload

TAIL_WASTE = 0.25  # a tile may pad an axis by at most this fraction of its extent (Roller's epsilon)


@dataclass(frozen=True)
class Operand:
    """One tensor read by the anchor block. dims[d] lists the terms of the index of dimension d as
    (axis, |coefficient|) or, for a floordiv of an axis by a constant (a group index:
    `(co // 32) * 16 + rc`), (axis, |coefficient|, divisor); None when the index is not of that
    form (the whole dimension counts)."""

    name: str
    shape: tuple[int, ...]
    dtype_bytes: int
    dims: tuple[tuple[tuple[int, ...], ...] | None, ...]

    def axes_used(self) -> frozenset[int]:
        # computed once: the construction asks it of every operand for every state it weighs
        cached = self.__dict__.get("_axes_used")
        if cached is None:
            cached = frozenset(t[0] for d in self.dims if d is not None for t in d)
            object.__setattr__(self, "_axes_used", cached)
        return cached

    def contiguous_axis(self) -> int | None:
        """The axis that indexes the innermost dimension with coefficient 1, if there is one."""
        last = self.dims[-1] if self.dims else None
        if last is None or len(last) != 1 or last[0][1:] != (1,):
            return None
        return last[0][0]


@dataclass(frozen=True)
class IterSpace:
    """The anchor block's iteration space: spatial axes then reduce axes, with their operands."""

    anchor: str
    axis_names: tuple[str, ...]
    extents: tuple[int, ...]
    num_spatial: int
    operands: tuple[Operand, ...]
    output_bytes: int
    flops_per_point: int
    other_blocks: tuple[str, ...] = ()
    producers: tuple[str, ...] = ()
    # operands bound to the workload's constants (a model's weights): a compiled model packs them
    # once, when it is compiled (graph/prepack.py), and the tuner times them so (tune/prepacked.py)
    constants: tuple[str, ...] = ()
    # derived values (kind): fresh in every instance, `replace` included (init=False)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    @property
    def spatial(self) -> tuple[int, ...]:
        return self.extents[: self.num_spatial]

    @property
    def reduce(self) -> tuple[int, ...]:
        return self.extents[self.num_spatial:]

    @property
    def has_reduce(self) -> bool:
        return len(self.extents) > self.num_spatial

    @property
    def kind(self) -> str:
        """'reuse' when tiling trades on-chip memory for traffic (matmul, conv); else 'plain' (Roller)."""
        kind = self._cache.get("kind")
        if kind is None:
            missing = self.has_reduce and [o for o in self.operands
                                           if any(e > 1 and a not in o.axes_used() for a, e in enumerate(self.spatial))]
            kind = self._cache["kind"] = "reuse" if len(self.operands) >= 2 and missing else "plain"
        return kind

    @property
    def vec_axis(self) -> int:
        """The innermost spatial axis (contiguous in the output), or -1 when it has extent 1."""
        return self.num_spatial - 1 if self.num_spatial and self.spatial[-1] > 1 else -1

    def flops(self) -> int:
        return self.flops_per_point * math.prod(self.extents)

    @staticmethod
    def from_workload(workload: Workload) -> IterSpace:
        anchor = anchor_tensor(workload)
        op = anchor.op
        axes = (*op.axes, *op.reduce_axes)
        index_of = {a.var: i for i, a in enumerate(axes)}
        unit = {len(op.axes) + i for i, a in enumerate(op.reduce_axes) if a.extent == 1}  # reduce axes of extent 1
        operands: dict[str, Operand] = {}
        source = op.body.source if isinstance(op.body, Reduce) else op.body
        outputs = {t.name for t in workload.outputs}
        for e in walk(_inline_spatial_reads(source, outputs)):
            if isinstance(e, TensorRead) and e.tensor.name not in operands:
                dims = tuple(_affine_axes(ix, index_of, unit) for ix in e.indices)
                operands[e.tensor.name] = Operand(e.tensor.name, e.tensor.shape, e.tensor.dtype.bits // 8, dims)
        producers = tuple(t.name for t in workload.computes if t is not anchor and _feeds(t, anchor))
        constants = tuple(n for n in (workload.inputs[i].name for i in workload.constants) if n in operands)
        others = tuple(t.name for t in workload.computes if t is not anchor)
        return IterSpace(
            anchor=anchor.name, axis_names=tuple(a.var.name for a in axes),
            extents=tuple(_tiled_extent(workload, a) for a in axes),
            num_spatial=len(op.axes), operands=tuple(operands.values()), output_bytes=anchor.dtype.bits // 8,
            flops_per_point=2 if isinstance(op.body, Reduce) else 1, other_blocks=others, producers=producers,
            constants=constants,
        )


def _tiled_extent(workload: Workload, axis: IterVar) -> int:
    """The extent Gensor tiles an axis for: its loop extent (a bucket's upper bound), but with a
    small dim from 1 that one kernel serves whole at 1 (a batch of 1..8: one bucket by default,
    te.dims.buckets; not named in the workload's bucket values): 1 for the batch axis, 128 for the
    rows of `batch*seq` at seq 128. The loop runs its whole extent in runs of those tiles, inside
    the parallel loop (to_trace), so a call of one image runs as a batch of one. Tiled at 8, a
    conv's register tile had held 2 images and its parallel loop run over the batch: a batch of 1
    ran on one core, computing twice its work."""
    extent = workload.loop_extent(axis)
    if axis.bound is None or axis.kind != "spatial":
        return extent
    at = workload.tuning_dims
    small = {d.name for d in dims_of(axis.bound)
             if d.lower == 1 and d.upper <= SMALLEST_BUCKET and d.name not in dict(workload.dims_at)}
    if not small:
        return extent  # a wider range: tiled at its bucket's extent
    return max(1, min(extent, value_of(axis.bound, {**at, **dict.fromkeys(small, 1)})))


def _inline_spatial_reads(e: Expr, outputs: set[str]) -> Expr:
    """`e` with reads of spatial intermediate stages (padding, transposes) replaced by their bodies,
    as compute_inline will do: the operands are then the buffers the kernel really reads."""

    def fn(x: Expr) -> Expr | None:
        t = x.tensor if isinstance(x, TensorRead) else None
        if t is None or t.op is None or getattr(t.op, "reduce_axes", None) or t.name in outputs:
            return None
        body = getattr(t.op, "body", None)
        if body is None or isinstance(body, Reduce):
            return None
        inner = substitute(body, {a.var: ix for a, ix in zip(t.op.axes, x.indices)})
        return _inline_spatial_reads(inner, outputs)

    return rewrite(e, fn)


def anchor_tensor(workload: Workload) -> Tensor:
    """The compute that dominates the work: most FLOPs, ties going to the later (consumer) one."""
    best: Tensor | None = None
    best_work = -1
    for t in workload.computes:
        work = math.prod(t.shape) * math.prod(a.extent for a in t.op.reduce_axes) * (2 if t.op.reduce_axes else 1)
        if work >= best_work:
            best, best_work = t, work
    assert best is not None
    return best


def _feeds(t: Tensor, consumer: Tensor) -> bool:
    stack, seen = list(consumer.inputs), set()
    while stack:
        x = stack.pop()
        if x is t:
            return True
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.inputs)
    return False


def _affine_axes(e: Expr, index_of: dict[Var, int], unit: set[int] = frozenset()) -> tuple[tuple[int, ...], ...] | None:
    """The terms of an index (see Operand.dims), or None if it is not affine in the axes and
    floordivs of single axes by constants. Axes in `unit` (reduce axes of extent 1, always 0) add
    no term: a depthwise convolution's channel index `co // 1 + rc` (rc of extent 1) reads along co
    alone, so its input counts as contiguous along co and its padding is inlined (to_trace.py)."""
    coefs = _linear(e, index_of)
    if coefs is None:
        return None
    return tuple(sorted((key, abs(c)) if isinstance(key, int) else (key[0], abs(c), key[1])
                        for key, c in coefs.items()
                        if c != 0 and (key if isinstance(key, int) else key[0]) not in unit))


def _linear(e: Expr, index_of: dict[Var, int]) -> dict[Any, int] | None:
    """Coefficient per axis (key: the axis) or per floordiv of an axis by a constant (key:
    (axis, divisor)) of an index (te/arith.py's affine form), or None."""
    terms, _ = affine(e)
    out: dict[Any, int] = {}
    for atom, c in terms.items():
        if isinstance(atom, Var) and atom in index_of:
            inner: dict[Any, int] | None = {index_of[atom]: 1}
        elif (isinstance(atom, BinOp) and atom.op == "floordiv" and isinstance(atom.a, Var) and atom.a in index_of
              and isinstance(atom.b, Const) and int(atom.b.value) >= 1):
            # a floordiv by 1 (a depthwise convolution's group of one channel) is the axis itself
            divisor = int(atom.b.value)
            inner = {(index_of[atom.a], divisor) if divisor > 1 else index_of[atom.a]: 1}
        elif isinstance(atom, BinOp) and atom.op in ("max", "min") and (isinstance(atom.a, Const) or isinstance(atom.b, Const)):
            # clamps of padding stages: max(h - 1, 0) moves like h - 1 except at the borders
            inner = _linear(atom.b if isinstance(atom.a, Const) else atom.a, index_of)
        else:
            return None
        if inner is None:
            return None
        for axis, k in inner.items():
            out[axis] = out.get(axis, 0) + c * k
    return out


# ----------------------------------------------------------------------------------------- the state


@dataclass(frozen=True)
class EtirState:
    """One program of the construction graph. Sizes are in elements, one entry per axis.

    Invariants (enforced by `canonical`): reg | l1 | l2 per spatial axis; every level covers at most
    one rounded-up extent; reg[vec_axis] is a multiple of vec_width; 1 <= rstep <= extent.
    """

    reg: tuple[int, ...]
    l1: tuple[int, ...]
    l2: tuple[int, ...]
    rstep: tuple[int, ...]
    vec_axis: int
    vec_width: int
    unroll: int = 1
    parallel: int = 1
    pack: tuple[str, ...] = ()
    # K grouping of the packed copies of 8- and 16-bit operands: each column's `dot_group`
    # consecutive reduction elements stored together, as the target's dot-product step reads them
    # (4: vpdpbusd's quads, 2: vdpbf16ps's and vpmaddwd's pairs; 0: rows as they are; to_trace.py)
    dot_group: int = 0
    # the register tile computed on the CPU's matrix unit (AMX tiles: tune/gensor/matrix_tiles.py),
    # its accumulators in tile registers, instead of vector registers
    matrix: bool = False

    @property
    def interleave(self) -> int:
        """Independent accumulator vectors along the vector axis (the CPU 'virtual thread' factor)."""
        return self.reg[self.vec_axis] // self.vec_width if self.vec_axis >= 0 else 1

    @property
    def operand_vectors(self) -> int:
        """Vector registers the micro-kernel's operands hold in one reduction step: B's vector per
        accumulator column and A's broadcast; int8 steps on 8-lane int32 vectors (AVX2's vpmaddwd,
        dot_group 2) hold two of each (B's (b0, b1) and (b2, b3) pairs, A's two broadcast pairs).
        Their two products before the add are not counted: tiles that leave room for them (8
        accumulators) measured about 1.3x slower on a Zen 5 core (as an AVX2 target) than those that spill a little."""
        if self.dot_group == 2 and self.vec_width == 8:
            return 2 * (self.interleave + 1)
        return self.interleave + 1

    @property
    def accumulators(self) -> int:
        """Vector registers holding the micro-tile's accumulators."""
        return max(1, math.prod(self.reg) // max(1, self.vec_width))

    def level(self, name: str) -> tuple[int, ...]:
        if name not in SPATIAL_LEVELS:
            raise KeyError(name)
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return {"reg": list(self.reg), "l1": list(self.l1), "l2": list(self.l2), "rstep": list(self.rstep),
                "vec_axis": self.vec_axis, "vec_width": self.vec_width, "unroll": self.unroll,
                "parallel": self.parallel, "pack": list(self.pack), "dot_group": self.dot_group,
                **({"matrix": True} if self.matrix else {})}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> EtirState:
        return EtirState(tuple(d["reg"]), tuple(d["l1"]), tuple(d["l2"]), tuple(d["rstep"]), int(d["vec_axis"]),
                         int(d["vec_width"]), int(d.get("unroll", 1)), int(d.get("parallel", 1)), tuple(d.get("pack", ())),
                         int(d.get("dot_group", 0)), bool(d.get("matrix", False)))


SPATIAL_LEVELS = ("reg", "l1", "l2")


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def waste(extent: int, tile: int) -> float:
    """Fraction of padded iterations when `extent` is covered by tiles of size `tile`."""
    return round_up(extent, tile) / extent - 1.0


def choose_vec_width(extent: int, lanes: int) -> int:
    """The widest power-of-two vector (<= lanes) whose padding of `extent` stays within TAIL_WASTE."""
    w = lanes
    while w > 1 and (w > extent * (1 + TAIL_WASTE) or waste(extent, w) > TAIL_WASTE):
        w //= 2
    return w


def canonical(space: IterSpace, s: EtirState) -> EtirState:
    """The normal form of a state: levels nested by divisibility and capped at one covering tile."""
    reg, l1, l2 = [], [], []
    micro = space.kind == "reuse" and s.vec_axis >= 0
    for a, e in enumerate(space.spatial):
        step = s.vec_width if a == s.vec_axis else 1
        r = min(round_up(max(s.reg[a], step), step), round_up(e, step))
        # micro-kernel family: an L1 tile would only regroup register tiles, so it is the register tile
        m1 = r if micro else min(round_up(max(s.l1[a], r), r), round_up(e, r))
        m2 = min(round_up(max(s.l2[a], m1), m1), round_up(e, m1))
        reg.append(r)
        l1.append(m1)
        l2.append(m2)
    if micro:
        rstep = space.reduce  # micro-kernel family: the whole reduction runs inside the register tile
    else:
        rstep = tuple(max(1, min(r, e)) for r, e in zip(s.rstep, space.reduce))
    unroll = s.unroll if rstep and rstep[-1] % s.unroll == 0 and s.unroll <= rstep[-1] else 1
    outer_axes = [a for a, e in enumerate(space.spatial) if -(-e // l2[a]) > 1]
    parallel = max(0, min(s.parallel, len(outer_axes)))
    reg_t = tuple(reg)
    # can_pack(space, out, n) for the state made here (it reads vec_axis and reg only); the
    # constants worth it are packed whatever the walk chose (`always_packed`)
    wide = s.vec_axis >= 0 and reg_t[s.vec_axis] > 1
    forced = always_packed(space) if wide else ()
    if not wide or not (s.pack or forced):
        pack: tuple[str, ...] = ()
    else:
        pack = tuple(sorted(n for n in {*s.pack, *forced} if n in packable_operands(space)))
    # the constructor, not dataclasses.replace: canonical runs for every move the walks weigh
    return EtirState(reg_t, tuple(l1), tuple(l2), rstep, s.vec_axis, s.vec_width, unroll, parallel, pack, s.dot_group,
                     s.matrix)


def packable_operands(space: IterSpace) -> tuple[str, ...]:
    """Operands worth packing into panels: read along the vector axis (contiguously, or through a
    dimension the copy moves last, see `pack_order`), reused across another spatial axis (the B of
    a GEMM, the weights of a conv, the transposed operand of a batch matmul)."""
    cached = space._cache.get("packable")
    if cached is not None:
        return cached
    v = space.vec_axis
    if space.kind != "reuse" or v < 0:
        space._cache["packable"] = ()
        return ()
    out = []
    for o in space.operands:
        used = o.axes_used()
        reused = any(e > 1 and a not in used for a, e in enumerate(space.spatial))
        along_v = o.contiguous_axis() == v or pack_order(o, v) is not None
        if along_v and (reused or _streamed_once(space, o)) and any(a >= space.num_spatial for a in used):
            out.append(o.name)
    result = space._cache["packable"] = tuple(out)
    return result


def _streamed_once(space: IterSpace, o: Operand) -> bool:
    """A constant every output point reads a distinct part of, with rows at least
    ALWAYS_PACKED_ROW_BYTES apart: a GEMV's weights (a decoder's step, one token: M = 1). Each
    parallel task reads its columns a few lines a row; packed (once, when the model is compiled)
    its panel is one sequential stream. Timed in C with 48 distinct 3072 x 768 weights cycled (453
    MB, as GPT-2's 494 MB a token; Xeon, 2 threads): 20-23 GB/s read in place, 29-33 packed."""
    spatial_used = {a for a in o.axes_used() if a < space.num_spatial}
    others = [e for a, e in enumerate(space.spatial) if a not in spatial_used]
    return (o.name in space.constants and all(e == 1 for e in others)
            and o.shape[-1] * o.dtype_bytes >= ALWAYS_PACKED_ROW_BYTES)


# A convolution weight's rows at least this far apart are read in panels whatever the walk chose.
ALWAYS_PACKED_ROW_BYTES = 1024


def always_packed(space: IterSpace) -> tuple[str, ...]:
    """A convolution's constant weights (a model's) that every state packs where it can: packable,
    with rows at least ALWAYS_PACKED_ROW_BYTES apart, in a space whose input is broadcast (not a
    depthwise convolution) and whose reduction runs over more than one axis (kernel rows, columns
    and channels: a convolution, not a GEMM); and a matrix-vector product's (`_streamed_once`: the
    walk, pricing the copy, never packs what it does not reuse). Their copy runs once, when the model is compiled (the
    tuner times them so too), and a packed panel streams where rows that far apart are read a few
    lines each, a row per reduction step. Timed as a compiled model runs them (Xeon with AVX-512, 2
    threads): ResNet-50's 7x7x2048 -> 512 1x1 convolution, the same tiles, 1.57 ms reading its
    weights in place and 0.38 prepacked; its 3x3 stride-2 one over 256 channels 2.6 -> 1.5-1.8.
    Left to the walk: shorter rows (MobileNet-V2's 16 -> 96 1x1 convolution, 384-byte rows, ran
    0.35 ms read in place and 0.59 packed; its depthwise ones 1.3-1.6x slower packed) and GEMMs
    (BERT's walks pack their weights already; GPT-2's 768 x 50257 LM head, forced, took a packed
    state with other tiles that ran 1.5x slower). The model still charges the copy per L2 block:
    made free, it moved BERT's FFN GEMMs to smaller blocks that ran 1.2x slower."""
    cached = space._cache.get("always_packed")
    if cached is not None:
        return cached
    conv = len(space.reduce) > 1 and any(space.vec_axis not in o.axes_used() for o in space.operands)
    out = tuple(o.name for o in space.operands if o.name in packable_operands(space) and (
        _streamed_once(space, o) or (conv and o.name in space.constants
                                     and o.shape[-1] * o.dtype_bytes >= ALWAYS_PACKED_ROW_BYTES)))
    space._cache["always_packed"] = out
    return out


def pack_order(o: Operand, v: int) -> tuple[int, ...] | None:
    """The dimension order of a packed copy that makes `o` contiguous along axis v: the dimension
    indexed by v alone (coefficient 1) moves last. None when `o` already is contiguous along v, or
    has no such dimension. TBG's value[b, j, h, d] read along j is copied as [b, h, d, j]."""
    if o.contiguous_axis() == v:
        return None
    dims = [d for d, dim in enumerate(o.dims) if dim is not None and len(dim) == 1 and dim[0] == (v, 1)]
    if len(dims) != 1:
        return None
    return tuple([d for d in range(len(o.dims)) if d != dims[0]] + dims)


def vector_contiguous(o: Operand, s: EtirState) -> bool:
    """Whether the micro-kernel reads `o` as whole vectors: contiguous along the vector axis, or
    packed into a copy that is (pack_order)."""
    if s.vec_width <= 1 or s.vec_axis < 0:
        return False
    return o.contiguous_axis() == s.vec_axis or (o.name in s.pack and pack_order(o, s.vec_axis) is not None)


def can_pack(space: IterSpace, s: EtirState, name: str) -> bool:
    """Whether `name` may be copied per parallel task (cache_read + compute_at): a packable operand
    and a register tile wider than one vector, so the copy is a panel the micro-kernel streams.
    Compaction shrinks the copy to the task's region, so its rows are the task's panel width."""
    return name in packable_operands(space) and s.vec_axis >= 0 and s.reg[s.vec_axis] > 1


def minimal_state(space: IterSpace, lanes: int) -> EtirState:
    """Every tile at its smallest aligned size (Roller's starting point), outermost loop parallel."""
    vec_axis = space.vec_axis
    width = choose_vec_width(space.spatial[vec_axis], lanes) if vec_axis >= 0 else 1
    reg = tuple(width if a == vec_axis else 1 for a in range(space.num_spatial))
    s = EtirState(reg, reg, reg, tuple(1 for _ in space.reduce), vec_axis, width, 1, 1, ())
    return canonical(space, s)


def parallel_tasks(space: IterSpace, s: EtirState) -> int:
    """Iterations of the fused parallel loop (1 when nothing runs in parallel)."""
    outer = [-(-e // s.l2[a]) for a, e in enumerate(space.spatial) if -(-e // s.l2[a]) > 1]
    return math.prod(outer[: s.parallel]) if s.parallel else 1


FOOTPRINTS_KEPT = 1 << 16  # tiles remembered per operand (footprint_bytes) before it starts again


def footprint_bytes(op: Operand, tiles: tuple[int, ...]) -> int:
    """Bytes of `op` touched by one tile (tile sizes for every axis, spatial then reduce)."""
    # remembered per operand: the walks weigh the same few tiles of it again and again
    known = op.__dict__.get("_footprints")
    if known is None or len(known) > FOOTPRINTS_KEPT:
        known = {}
        object.__setattr__(op, "_footprints", known)
    tiles = tiles if type(tiles) is tuple else tuple(tiles)
    n = known.get(tiles)
    if n is None:
        n = 1
        for d in range(len(op.shape)):
            n *= touched_extent(op, d, tiles)
        n = known[tiles] = n * op.dtype_bytes
    return n


def touched_extent(op: Operand, d: int, tiles: tuple[int, ...]) -> int:
    """Elements of dimension d one tile touches: the span of its index, `sum c * (T - 1) + 1`. A
    floordiv term takes ceil(T / divisor) values, and a dimension with one counts at most the
    product of its terms' values: a tile of 128 output channels, 32 per group, reads 4 groups of
    the input's channels (`(co // 32) * 16 + rc`), not a span of 49."""
    dim = op.dims[d]
    if dim is None:
        return op.shape[d]
    span = product = 1
    for term in dim:
        axis, c = term[0], term[1]
        values = -(-tiles[axis] // term[2]) if len(term) > 2 else tiles[axis]
        span += c * (values - 1)
        product *= values
    grouped = any(len(term) > 2 for term in dim)
    return min(op.shape[d], min(span, product) if grouped else span)


__all__ = [
    "EtirState", "IterSpace", "Operand", "SPATIAL_LEVELS", "pack_order", "vector_contiguous", "TAIL_WASTE",
    "anchor_tensor", "canonical",
    "always_packed", "choose_vec_width", "footprint_bytes", "minimal_state", "can_pack", "packable_operands", "parallel_tasks",
    "round_up", "touched_extent", "waste",
]
