"""verify: structural checks every loop-IR Func must pass before it is interpreted or lowered.

    verify(func)        # returns None, or raises VerifyError naming the first problem found

Checked:
    loop variables are unique in the Func and every variable is bound (by an enclosing loop or
    block) before it is used; every BufferLoad/BufferStore has one index per buffer dimension;
    every buffer used is a param, an alloc or inside an Allocate of it; a block has one binding
    per iteration variable; loop, block-variable and buffer extents are positive; loop kinds are
    known; a vectorized loop contains no loop; a GPU thread loop is not nested in a loop of the
    same kind; a Barrier is only inside a GPU thread loop (threadIdx.* or vthread).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import (
    LOOP_KINDS,
    Allocate,
    AllReduce,
    Barrier,
    Block,
    Buffer,
    BufferStore,
    For,
    Func,
    IfThenElse,
    Prefetch,
    Seq,
    Stmt,
    TileProduct,
)
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.expr import BufferLoad, Expr, Reduce, TensorRead, Var
from tilegraph.te.visit import walk

THREAD_KINDS = ("threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")


class VerifyError(LoweringError):
    """A loop-IR Func is malformed (unbound variable, wrong index count, unknown buffer, ...)."""


@dataclass(frozen=True)
class _Scope:
    vars: frozenset[str]
    buffers: frozenset[str]
    loop_kinds: tuple[str, ...]


def verify(func: Func) -> None:
    """Raise VerifyError if `func` breaks one of the loop-IR invariants listed in the module doc."""
    names = [b.name for b in func.buffers]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise VerifyError(f"{func.name}: buffer name(s) {duplicated} declared more than once")
    for b in func.buffers:
        _check_buffer(func, b)
    scope = _Scope(frozenset(), frozenset(names), ())
    _check_stmt(func, func.body, scope, set())


def _fail(func: Func, message: str) -> None:
    raise VerifyError(f"{func.name}: {message}")


def _check_buffer(func: Func, b: Buffer) -> None:
    if any(int(s) <= 0 for s in b.shape):
        _fail(func, f"buffer {b.name} has a non-positive extent in its shape {b.shape}")
    if b.padding and (len(b.padding) != len(b.shape) or any(p < 0 for p in b.padding)):
        _fail(func, f"buffer {b.name} has padding {b.padding} that does not match its shape {b.shape}")


def _check_expr(func: Func, e: Expr, scope: _Scope, where: str) -> None:
    for x in walk(e):
        if isinstance(x, Var) and x.name not in scope.vars:
            _fail(func, f"variable {x.name} is used in {where} but not bound by an enclosing loop or block")
        elif isinstance(x, BufferLoad):
            _check_access(func, x.buffer, len(x.indices), scope, f"a load in {where}")
        elif isinstance(x, (TensorRead, Reduce)):
            _fail(func, f"{type(x).__name__} (a te-only node) appears in {where}")


def _check_access(func: Func, b: Buffer, n_indices: int, scope: _Scope, what: str) -> None:
    if b.name not in scope.buffers:
        _fail(func, f"{what} uses buffer {b.name}, which is not a param, an alloc or Allocate'd here")
    if n_indices != b.ndim:
        _fail(func, f"{what} indexes buffer {b.name} ({b.ndim}-d) with {n_indices} indices")


def _check_stmt(func: Func, s: Stmt, scope: _Scope, loop_vars: set[str]) -> None:
    if isinstance(s, Seq):
        for x in s.stmts:
            _check_stmt(func, x, scope, loop_vars)
    elif isinstance(s, For):
        _check_for(func, s, scope, loop_vars)
    elif isinstance(s, Block):
        _check_block(func, s, scope, loop_vars)
    elif isinstance(s, BufferStore):
        what = f"the store to {s.buffer.name}"
        _check_access(func, s.buffer, len(s.indices), scope, what)
        for i in s.indices:
            _check_expr(func, i, scope, what)
        _check_expr(func, s.value, scope, what)
    elif isinstance(s, IfThenElse):
        _check_expr(func, s.cond, scope, "an if condition")
        _check_stmt(func, s.then_body, scope, loop_vars)
        if s.else_body is not None:
            _check_stmt(func, s.else_body, scope, loop_vars)
    elif isinstance(s, Allocate):
        _check_buffer(func, s.buffer)
        inner = _Scope(scope.vars, scope.buffers | {s.buffer.name}, scope.loop_kinds)
        _check_stmt(func, s.body, inner, loop_vars)
    elif isinstance(s, Barrier):
        if not any(k in THREAD_KINDS for k in scope.loop_kinds):
            _fail(func, "a barrier is outside every GPU thread loop (threadIdx.* / vthread)")
    elif isinstance(s, AllReduce):
        _check_all_reduce(func, s, scope)
    elif isinstance(s, TileProduct):
        _check_tile_product(func, s, scope)
    elif isinstance(s, Prefetch):
        what = f"the prefetch of {s.buffer.name}"
        _check_access(func, s.buffer, 1, scope, what)
        _check_expr(func, s.index, scope, what)
        if not (s.index.dtype.is_int and s.index.dtype.lanes == 1) or s.lines < 1 or s.locality not in (0, 1, 2, 3):
            _fail(func, f"{what}: a scalar integer index, at least one line and locality 0-3")
    else:
        _fail(func, f"unknown statement node {type(s).__name__}")


def _check_tile_product(func: Func, s: TileProduct, scope: _Scope) -> None:
    what = f"tile_product({s.acc.name} += {s.a.name} . {s.b.name})"
    for b in (s.acc, s.a, s.b):
        _check_access(func, b, 1, scope, what)
    for e in (s.acc_at, s.a_at, s.b_at):
        _check_expr(func, e, scope, what)
    if not s.a_tiles or any(r < 1 for r, _ in s.a_tiles) or s.cols < 1 or s.group < 1 or s.depth < 1 \
            or s.depth % s.group or any(e < 1 for e, _, _ in s.steps):
        _fail(func, f"{what}: its tiles ({s.a_tiles}, {s.cols} columns, depth {s.depth} in groups of {s.group}, "
                    f"steps {s.steps}) are not positive, or the depth not whole groups")


def _check_all_reduce(func: Func, s: AllReduce, scope: _Scope) -> None:
    what = f"allreduce({s.buffer.name})"
    if s.buffer.name not in scope.buffers and s.buffer.name not in {b.name for b in func.buffers}:
        _fail(func, f"{what}: buffer {s.buffer.name} is not allocated here")
    if s.buffer.scope != "local":
        _fail(func, f"{what}: the buffer must be local (one copy per thread), not {s.buffer.scope}")
    if s.combiner not in ("sum", "max", "min", "prod"):
        _fail(func, f"{what}: unknown combiner {s.combiner!r}")
    if s.width < 1 or s.width & (s.width - 1):
        _fail(func, f"{what}: width {s.width} is not a power of two")
    if s.width > 1 and "threadIdx.x" not in scope.loop_kinds:
        _fail(func, f"{what}: not inside a threadIdx.x loop")


def _check_for(func: Func, s: For, scope: _Scope, loop_vars: set[str]) -> None:
    name = s.var.name
    if name in loop_vars:
        _fail(func, f"loop variable {name} is used by two loops (loop variables must be unique)")
    loop_vars.add(name)
    if s.kind not in LOOP_KINDS:
        _fail(func, f"loop {name} has unknown kind {s.kind!r}; known: {LOOP_KINDS}")
    if not isinstance(s.extent, int) or s.extent <= 0:
        _fail(func, f"loop {name} has non-positive extent {s.extent}")
    if s.kind == "vectorized":
        if any(isinstance(x, For) for x in walk_stmts(s.body)):
            _fail(func, f"vectorized loop {name} contains another loop")
    if s.kind in THREAD_KINDS[:3] or s.kind.startswith("blockIdx"):
        if s.kind in scope.loop_kinds:
            _fail(func, f"loop {name} is bound to {s.kind} inside another {s.kind} loop")
    inner = _Scope(scope.vars | {name}, scope.buffers, (*scope.loop_kinds, s.kind))
    _check_stmt(func, s.body, inner, loop_vars)


def _check_block(func: Func, s: Block, scope: _Scope, loop_vars: set[str]) -> None:
    if len(s.bindings) != len(s.iter_vars):
        _fail(func, f"block {s.name} has {len(s.iter_vars)} iteration variables but {len(s.bindings)} bindings")
    for iv, bind in zip(s.iter_vars, s.bindings):
        if iv.extent <= 0:
            _fail(func, f"block {s.name}: iteration variable {iv.var.name} has non-positive extent {iv.extent}")
        if iv.kind not in ("spatial", "reduce"):
            _fail(func, f"block {s.name}: iteration variable {iv.var.name} has unknown kind {iv.kind!r}")
        _check_expr(func, bind, scope, f"the binding of {iv.var.name} in block {s.name}")
    _check_expr(func, s.predicate, scope, f"the predicate of block {s.name}")
    inner = _Scope(scope.vars | {iv.var.name for iv in s.iter_vars}, scope.buffers, scope.loop_kinds)
    if s.init is not None:
        _check_stmt(func, s.init, inner, loop_vars)
    _check_stmt(func, s.body, inner, loop_vars)


__all__ = ["VerifyError", "verify", "THREAD_KINDS"]
