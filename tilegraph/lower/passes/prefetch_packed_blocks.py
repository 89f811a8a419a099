"""prefetch_packed_blocks: a kernel that reads a prepacked operand block by block prefetches the
next block while it computes on the current one.

Before (the compute kernel of a prepacked 128x768 . 768x3072 GEMM; `b_packed` holds one block of
73728 elements per iteration of i2_0, read again by every row tile i1_0):

    for i2_0 in range(32) parallel:
      for i1_0 in range(16):
        for i2_1 in range(2):
          for k_0 in range(96):
            ... b_packed[ramp(i2_1*36864 + k_0*384 + i2_0*73728 + c, 1, 16)] ...

After (the 73728 elements spread over the 16 x 2 x 96 iterations that compute on block i2_0: 24
elements, two cache lines, an iteration):

          for k_0 in range(96):
            prefetch(b_packed[min((i2_0 + 1)*73728 + ((i1_0*2 + i2_1)*96 + k_0)*24, 2359295)], lines=2, locality=3)
            ...

Why: in a whole model a weight comes from memory, not from the cache it sat in when the kernel
was timed alone (GPT-2's weights are 500 MB). Without the hint the first row tile of every block
waits on memory (one stream per core: the hardware prefetcher follows it a page at a time), and
the rest of the block's tiles then hit L2; with it, the next block is on its way while the current
one is computed on. Measured on the Xeon (2 threads, Gensor's constructed kernels, each call on
one of 40 copies of the weights as a model reads them, without -> with): 128x768 . 768x3072 2.66 ->
2.11 ms, . 768x2304 2.21 -> 1.95; 128x3072 . 3072x768 3.00 -> 2.91 only (its 1.2 MB blocks and the
1.5 MB of A it reads with each do not fit L2 together). Whole models, untuned, raced in one process:
GPT-2 169 -> 145 ms, BERT-base 118 -> 110, ResNet-50 37.5 -> 35.7. A tile of 8 rows over 32 has
few iterations a block: GPT-2's LM head at 32 tokens (blocks of 768 x 96, 4 x 2 x 96 iterations)
needs 6 lines an iteration, and without them (4 at most, as first set) ran 13.4 ms, with them
10.2 (in C, 3 copies of the 154 MB weights cycled).

Applies where one loop nest reads the buffer, every read's index is affine in its loops, and an
outer loop (the block loop) moves every read by one stride that the reads of one iteration span
at least half of; the block is at least MIN_BLOCK_BYTES and the spread needs at most MAX_LINES
lines an iteration. Anything else is returned unchanged, and so is a nest whose tiles a matrix
unit reads (TileProduct). The index is clamped into the buffer (the last block prefetches its own
last line); a prefetch changes no value (loop/ir.py's Prefetch).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import Buffer, For, Func, Prefetch, Seq, Stmt, TileProduct
from tilegraph.loop.visit import stmt_children, stmt_exprs, walk_stmts
from tilegraph.te.arith import affine
from tilegraph.te.expr import BinOp, BufferLoad, Const, Expr, Ramp, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import walk

LINE_BYTES = 64
MIN_BLOCK_BYTES = 16 << 10  # smaller blocks come from memory in less time than a row tile takes
MAX_LINES = 8               # prefetches an iteration at most (each is a load slot)
LOCALITY = 3                # prefetcht0: measured faster than into L2 only (prefetcht1)


def run(func: Func, target: object, packed: str) -> Func:
    """`func` with the next block of its parameter `packed` prefetched (module docstring)."""
    if getattr(target, "kind", "cpu") != "cpu":
        return func
    buffer = next((b for b in func.params if b.name == packed), None)
    if buffer is None or buffer.ndim != 1:
        return func
    if any(isinstance(s, TileProduct) and packed in (s.a.name, s.b.name) for s in walk_stmts(func.body)):
        return func  # a matrix unit's tiles read it: their reads are not loads this pass can follow
    nests = list(_reading_nests(func.body, (), packed))
    if len(nests) != 1:
        return func
    path, loads = nests[0]
    prefetch = _prefetch(path, loads, buffer)
    if prefetch is None:
        return func
    inner = path[-1]
    return replace_node(func, inner, For(inner.var, inner.extent, inner.kind, Seq((prefetch, inner.body))))


def _reading_nests(s: Stmt, path: tuple[For, ...], name: str) -> Iterator[tuple[tuple[For, ...], list[BufferLoad]]]:
    """(enclosing loops, outermost first; the loads of `name`) for every loop whose own statements
    (not those of a loop inside it) load `name`, and for the statements outside every loop."""
    own: list[BufferLoad] = []
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, For):
            yield from _reading_nests(x.body, (*path, x), name)
            continue
        own += _loads_of(x, name)
        stack.extend(reversed(stmt_children(x)))
    if own:
        yield path, own


def _loads_of(s: Stmt, name: str) -> list[BufferLoad]:
    return [x for e in stmt_exprs(s) for x in walk(e) if isinstance(x, BufferLoad) and x.buffer.name == name]


def _prefetch(path: tuple[For, ...], loads: list[BufferLoad], buffer: Buffer) -> Prefetch | None:
    if not path or any(lp.kind != "serial" and lp.kind != "parallel" for lp in path):
        return None
    loop_of = {lp.var: lp for lp in path}
    reads = []  # (coefficient per loop var, constant, elements one read covers)
    for load in loads:
        index = load.indices[0]
        base, width = (index.base, (index.lanes - 1) * index.stride + 1) if isinstance(index, Ramp) else (index, 1)
        if isinstance(index, Ramp) and index.stride < 1:
            return None
        terms, constant = affine(base, through_casts=True)
        if any(not isinstance(a, Var) or a not in loop_of or c < 0 for a, c in terms.items()):
            return None
        reads.append((terms, constant, width))
    # the block loop: the outermost loop that moves the reads
    moving = [(p, lp) for p, lp in enumerate(path[:-1]) if any(terms.get(lp.var, 0) for terms, _, _ in reads)]
    if not moving:
        return None
    position, lp = moving[0]
    strides = {terms.get(lp.var, 0) for terms, _, _ in reads}
    if len(strides) != 1 or lp.extent < 2:
        return None
    stride = strides.pop()
    inner = path[position + 1:]
    low = min(constant for _, constant, _ in reads)
    high = max(constant + width - 1 + sum(terms.get(x.var, 0) * (x.extent - 1) for x in inner)
               for terms, constant, width in reads)
    span = high - low + 1
    itemsize = buffer.dtype.itemsize
    if span > stride or 2 * span < stride or stride * itemsize < MIN_BLOCK_BYTES:
        return None
    iterations = math.prod(x.extent for x in inner)
    step = -(-stride // iterations)  # elements an iteration brings in
    lines = max(1, -(-step * itemsize // LINE_BYTES))
    if lines > MAX_LINES:
        return None
    index_type = lp.var.dtype
    count: Expr | None = None  # the iteration's number among those computing on one block
    for x in inner:
        count = x.var if count is None else BinOp("add", BinOp("mul", count, Const(x.extent, index_type)), x.var)
    start = BinOp("add", BinOp("mul", BinOp("add", lp.var, Const(1, index_type)), Const(stride, index_type)),
                  Const(low, index_type))
    at = BinOp("add", start, BinOp("mul", count, Const(step, index_type)))  # type: ignore[arg-type]
    return Prefetch(buffer, simplify(BinOp("min", at, Const(buffer.size - 1, index_type))), lines, LOCALITY)


__all__ = ["run"]
