"""The loop-nest IR that schedules rewrite, lowering refines and printers print.

All nodes are frozen dataclasses: a primitive or pass returns a new tree and never edits one.
Extents are static integers and every loop starts at 0.

    Func(name, params, body, allocs)        params: inputs then outputs; allocs: other buffers
    For(var, extent, kind, body)            kind in LOOP_KINDS
    Block(name, iter_vars, bindings, body, init, predicate)
        One instance of a computation. `iter_vars` are the block's own variables (spatial or
        reduce); `bindings` give their values in terms of the enclosing loop variables. `init`
        runs in the instance where every reduce var is 0, before `body`. The instance runs only
        where `predicate` holds (guarded tails of non-dividing splits).
    BufferStore(buffer, indices, value)
    Seq(stmts), IfThenElse(cond, then_body, else_body)
    Allocate(buffer, body)                  lowered IR: `buffer` lives for `body`
    Barrier(scope)                          GPU: all threads of a block wait here
    AllReduce(buffer, combiner, width)      GPU: each element of a local buffer becomes its combination
                                            over `width` neighbouring threadIdx.x lanes (warp shuffles)
    TileProduct(acc, a, b, ...)             lowered CPU IR: a register tile's product on the matrix unit
                                            (AMX tiles), summed over a nest of reduction steps

Variables are compared by name, so loop variables are unique in a Func; block variables are
local to their block (conventionally named v_<axis>).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilegraph import dtype as dt
from tilegraph.hashing import hash_once
from tilegraph.te.buffer import Buffer  # re-exported: the loop IR's arrays (BufferLoad, a te node, names them)
from tilegraph.te.expr import Const, Expr, Var

SCOPES = ("global", "local", "shared")
GPU_LOOP_KINDS = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z",
    "threadIdx.x", "threadIdx.y", "threadIdx.z",
    "vthread",
)
LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", *GPU_LOOP_KINDS)
TRUE = Const(True, dt.bool_)


class Stmt:
    """Base of statement nodes."""

    __slots__ = ()


@hash_once
@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@hash_once
@dataclass(frozen=True)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@hash_once
@dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None


@hash_once
@dataclass(frozen=True)
class For(Stmt):
    var: Var
    extent: int
    kind: str
    body: Stmt

    @property
    def name(self) -> str:
        return self.var.name


@hash_once
@dataclass(frozen=True)
class BlockVar:
    var: Var
    extent: int
    kind: str = "spatial"  # "spatial" | "reduce"


@hash_once
@dataclass(frozen=True)
class Block(Stmt):
    name: str
    iter_vars: tuple[BlockVar, ...]
    bindings: tuple[Expr, ...]
    body: Stmt
    init: Stmt | None = None
    predicate: Expr = TRUE


@hash_once
@dataclass(frozen=True)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@hash_once
@dataclass(frozen=True)
class Barrier(Stmt):
    scope: str = "shared"


@hash_once
@dataclass(frozen=True)
class AllReduce(Stmt):
    """GPU: the threads of a group of `width` consecutive threadIdx.x lanes (lane // width, within
    one value of the other thread indices) each replace every element of the local `buffer` by
    its `combiner` ("sum" | "max" | "min") over the group, combined in xor-butterfly order:

        for m in width/2, width/4, ..., 1:   v = v (+) (v of lane ^ m)

    (CUDA: __shfl_xor_sync). Every thread of the group must reach it (no divergent guard around it).
    """

    buffer: Buffer
    combiner: str
    width: int


@hash_once
@dataclass(frozen=True)
class Prefetch(Stmt):
    """A hint that `lines` consecutive cache lines from the address of `buffer[index]` will be read
    soon (CPU: __builtin_prefetch with `locality` 0-3, 3 = into every cache level). It reads no
    value and changes none: the interpreter skips it, and a program means the same without it.
    The index is a scalar element index within the flat buffer; the lines may reach past its end
    (a prefetch never faults). Only lowering makes it (lower/passes/prefetch_packed_blocks.py)."""

    buffer: Buffer
    index: Expr
    lines: int = 1
    locality: int = 3


@hash_once
@dataclass(frozen=True)
class TileProduct(Stmt):
    """A register tile's matrix product summed over a nest of reduction steps (a batch-reduce GEMM,
    oneDNN's brgemm): what a CPU's matrix unit computes from tiles (AMX: tdpbf16ps on bfloat16,
    tdpbusd on uint8 x int8). Only lowering makes it (lower/passes/use_matrix_tiles.py), on flat
    buffers. Its meaning, with g = `group`, for every point (s_0, .., s_q) of the `steps` nest
    ((extent, a_step, b_step) each, outermost first), every row tile t = (rows_t, a_offset_t)
    whose rows follow those of the tiles before it (m = first_t + r, r < rows_t), every column
    n < `cols` and every k < `depth`:

        acc[acc_at + m*acc_ld + n] += widen(a[a_at + a_offset_t + r*a_ld + k + sum(s_i * a_step_i)])
                                    * widen(b[b_at + (k // g)*b_ld + n*g + k % g + sum(s_i * b_step_i)])

    With `zero`, each accumulator is the sum alone (what acc held before is not read: a tile
    product right after its accumulators' initialisation takes it over, AMX's tilezero).

    b holds each column's g consecutive reduction elements together (the dot-product steps' K
    groups: vnni pairs of bfloat16, quads of int8), so a tile row of b is the 64 bytes of 16
    columns. The interpreter adds the exact sum of all products to each accumulator once: integer
    sums wrap as int32 (tdpbusd neither saturates nor rounds: the same bits), float sums are
    rounded to float32 once, where the hardware rounds as it accumulates (within float32 rounding
    of the accumulation, as a vector FMA order already moves it; tests compare with tolerances) and
    flushes subnormal operands and results to zero, as vdpbf16ps does.
    """

    acc: Buffer
    acc_at: Expr
    acc_ld: int
    a: Buffer
    a_at: Expr
    a_ld: int
    a_tiles: tuple[tuple[int, int], ...]  # (rows, offset in a) per row tile, top down
    b: Buffer
    b_at: Expr
    b_ld: int
    cols: int
    depth: int
    group: int
    steps: tuple[tuple[int, int, int], ...] = ()
    zero: bool = False  # the accumulators start at zero (acc = the sum), not at what acc holds

    @property
    def rows(self) -> int:
        return sum(r for r, _ in self.a_tiles)


@dataclass(frozen=True)
class Func:
    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    allocs: tuple[Buffer, ...] = ()
    attrs: tuple[tuple[str, object], ...] = field(default=())

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        return (*self.params, *self.allocs)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)


def seq(*stmts: Stmt) -> Stmt:
    """A Seq, flattened; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))
