"""Prepacking: a kernel's packing of a constant operand taken out of the kernel, into a kernel of its
own that runs once, when the model is compiled (ONNX Runtime and oneDNN prepack weights the same way).

    split = split_constant_packing(lowered, "b", n_inputs=2)   # None: the kernel packs no such operand
    split.pack       # Func (b) -> (b_packed): the packing nest, for every value of the loops around it
    split.compute    # Func: the kernel, reading b_packed where it read its own packed copy of b

A schedule that packs an operand (cache_read into a global buffer) copies it at every call; for a
weight the copy is the same every time. Measured on an AMD EPYC (GPT-2's 128x3072 . 3072x768 GEMM,
2 threads, caches flushed between calls as in a whole model): 1.45 ms with the copy, 1.32 ms
prepacked.

Before (lowered IR):

    func f(a, b, c):
      for j_0 in range(2) parallel:
        allocate b_global: float32[1179648] scope=global
          for ax0 in range(3072): for ax1 in range(24):
            b_global[ramp(ax0*384 + ax1*16, 1, 16)] = b[ramp(ax0*768 + j_0*384 + ax1*16, 1, 16)]
          <compute reading b_global[...]>

After:

    func f_pack(b, b_packed):                        # once per weight
      for j_0 in range(2):
        for ax0 in range(3072): for ax1 in range(24):
          b_packed[ramp(j_0*1179648 + ax0*384 + ax1*16, 1, 16)] = b[ramp(ax0*768 + j_0*384 + ax1*16, 1, 16)]
    func f(a, b_packed, c):
      for j_0 in range(2) parallel:
        <compute reading b_packed[j_0*1179648 + ...]>

Legal when the path from the function's body to the allocation is loops, other allocations and
sequences;
the allocation's body (inside any allocations it opens first: a schedule's accumulators, which
stay around the rest) is a sequence whose first statement writes only the allocated buffer and
reads only the operand (an input of the function, read nowhere else); and nothing after it writes
the buffer. Loops around it that the packing does not use do not index the packed copy (one slab
serves them all); one it reads only as `v % c` (a parallel loop fusing row blocks with the
weights' column blocks, `fused % 3`) indexes c slabs; a packed copy more than MAX_GROWTH times the
operand is not made. Both kernels
are exact: the compute kernel reads the values the packing nest would have written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from tilegraph.loop.edit import map_stmt_exprs, replace_buffer, replace_node
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, For, Func, IfThenElse, Seq, Stmt
from tilegraph.loop.verify import verify
from tilegraph.loop.visit import loads_under, stmt_exprs, walk_stmts
from tilegraph.te.expr import BinOp, Const, Expr, Ramp, Var
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import children, free_vars

MAX_GROWTH = 2.0  # the packed copy may be at most this many times the operand


@dataclass(frozen=True)
class PackSplit:
    pack: Func      # params (operand, packed)
    compute: Func   # the kernel's params with the operand replaced by `packed`, in its position
    packed: Buffer


def split_constant_packing(func: Func, param: str, n_inputs: int) -> PackSplit | None:
    """The kernel `func` (lowered) split into the packing of its input `param` and the rest, or None
    where it does not pack `param` in the form above."""
    source = next((b for b in func.params[:n_inputs] if b.name == param), None)
    if source is None or source.ndim != 1:
        return None
    found = _packing_allocation(func.body, source, [])
    return None if found is None else _split(func, source, *found)


def _packing_allocation(node: Stmt, source: Buffer, enclosing: list[For]) -> tuple[Allocate, list[For]] | None:
    """The first allocation filled from `source` reached through loops, allocations and sequences
    (with the loops around it), or None."""
    if isinstance(node, Allocate):
        if _packs(node, source):
            return node, enclosing
        return _packing_allocation(node.body, source, enclosing)
    if isinstance(node, For):
        return _packing_allocation(node.body, source, [*enclosing, node])
    if isinstance(node, Seq):
        for stmt in node.stmts:
            found = _packing_allocation(stmt, source, enclosing)
            if found is not None:
                return found
    return None


def _inside(alloc: Allocate) -> tuple[list[Allocate], Stmt]:
    """(the allocations `alloc`'s body opens before anything else, outermost first; what they hold):
    a schedule may declare its accumulators between the packed copy and the nest filling it."""
    inner, body = [], alloc.body
    while isinstance(body, Allocate):
        inner.append(body)
        body = body.body
    return inner, body


def _packs(alloc: Allocate, source: Buffer) -> bool:
    """`alloc`'s body starts (inside the allocations it opens first) with a nest that fills its
    buffer from `source` alone, and nothing after that writes the buffer or reads `source`."""
    (_, body), buffer = _inside(alloc), alloc.buffer
    if not isinstance(body, Seq) or len(body.stmts) < 2 or buffer.ndim != 1 or buffer.dtype != source.dtype:
        return False
    fill, rest = body.stmts[0], body.stmts[1:]
    stmts = list(walk_stmts(fill))
    if not all(isinstance(s, (For, Seq, BufferStore, IfThenElse)) for s in stmts):
        return False
    stores = [s for s in stmts if isinstance(s, BufferStore)]
    if not stores or any(s.buffer.name != buffer.name for s in stores):
        return False
    if any(load.buffer.name != source.name for load in loads_under(fill)):
        return False
    for s in rest:
        if any(isinstance(x, BufferStore) and x.buffer.name == buffer.name for x in walk_stmts(s)):
            return False
        if any(load.buffer.name == source.name for load in loads_under(s)):
            return False
    return True


def _split(func: Func, source: Buffer, alloc: Allocate, enclosing: list[For]) -> PackSplit | None:
    inner, body = _inside(alloc)
    fill, rest = body.stmts[0], body.stmts[1:]  # type: ignore[attr-defined]
    own = {s.var.name for s in walk_stmts(fill) if isinstance(s, For)}
    used = {v.name for s in walk_stmts(fill) for e in stmt_exprs(s) for v in free_vars(e)} - own
    enclosing_names = {loop.var.name for loop in enclosing}
    if used - enclosing_names:
        return None  # the packing reads a variable bound elsewhere: not a pure function of the operand
    # (index in the kernel, loop of the packing nest) per slab dimension, outermost first: a loop the
    # packing uses, or the remainder `v % c` of one it uses only so (a parallel loop fusing the
    # weights' column blocks with row blocks, which the packing does not read: c slabs, not extent)
    indexing: list[tuple[Expr, Var, int]] = []  # (index in the kernel, packing loop's variable, extent)
    for loop in enclosing:
        if loop.var.name not in used:
            continue
        divisor = _remainder_only(fill, loop.var)
        if divisor is None:
            indexing.append((loop.var, loop.var, loop.extent))
        else:
            r = Var(f"{loop.var.name}_slab", loop.var.dtype)
            fill = _with_remainder(fill, loop.var, divisor, r)
            indexing.append((loop.var % Const(divisor, loop.var.dtype), r, divisor))
    slab = alloc.buffer.size
    copies = math.prod(extent for _, _, extent in indexing)
    if copies * slab > MAX_GROWTH * source.size:
        return None
    packed = Buffer(f"{source.name}_packed", (copies * slab,), source.dtype)
    pack_offset: Expr = Const(0)
    compute_offset: Expr = Const(0)
    stride = slab
    for index, var, extent in reversed(indexing):
        pack_offset = pack_offset + var * stride
        compute_offset = compute_offset + index * stride
        stride *= extent

    def shifted(offset: Expr) -> Callable[[tuple[Expr, ...]], tuple[Expr, ...]]:
        def into_packed(indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
            (index,) = indices
            if isinstance(index, Ramp):
                return (Ramp(simplify(index.base + offset), index.stride, index.lanes),)
            return (simplify(index + offset),)
        return into_packed

    pack_body: Stmt = replace_buffer(fill, alloc.buffer.name, packed, shifted(pack_offset), loads=False)
    for _, var, extent in reversed(indexing):
        pack_body = For(var, extent, "serial", pack_body)
    pack = Func(f"{func.name}_pack", (source, packed), pack_body)
    kept = Seq(tuple(rest)) if len(rest) > 1 else rest[0]
    kept = replace_buffer(kept, alloc.buffer.name, packed, shifted(compute_offset), stores=False)
    for opened in reversed(inner):  # the accumulators declared around the packing stay around the rest
        kept = replace(opened, body=kept)
    params = tuple(packed if b.name == source.name else b for b in func.params)
    compute = replace_node(func, alloc, kept)
    if any(load.buffer.name == source.name for load in loads_under(compute.body)):
        return None  # the kernel also reads the operand outside its packing: it needs both
    compute = replace(compute, params=params, allocs=tuple(b for b in compute.allocs if b.name != alloc.buffer.name))
    verify(pack)
    verify(compute)
    return PackSplit(pack, compute, packed)


def _remainder_only(s: Stmt, v: Var) -> int | None:
    """c when every use of `v` in the expressions of `s` is `v % c` (one c), else None."""
    divisors: set[int] = set()
    bare = False

    def visit(e: Expr) -> None:
        nonlocal bare
        if isinstance(e, BinOp) and e.op == "floormod" and e.a == v and isinstance(e.b, Const):
            divisors.add(int(e.b.value))
            return
        if e == v:
            bare = True
            return
        for k in children(e):
            visit(k)

    for x in walk_stmts(s):
        for e in stmt_exprs(x):
            visit(e)
    return divisors.pop() if len(divisors) == 1 and not bare else None


def _with_remainder(s: Stmt, v: Var, divisor: int, r: Var) -> Stmt:
    """`s` with `v % divisor` replaced by `r`."""
    def fn(e: Expr) -> Expr | None:
        if isinstance(e, BinOp) and e.op == "floormod" and e.a == v and e.b == Const(divisor, e.b.dtype):
            return r
        return None

    return map_stmt_exprs(s, fn)


__all__ = ["MAX_GROWTH", "PackSplit", "split_constant_packing"]
