"""Reading loop-IR statements: children, walks, the expressions a statement holds, search by name.
Building changed copies (rewrites, substitution, replacing nodes or buffers) is loop/edit.py."""

from __future__ import annotations

from collections.abc import Iterator

from tilegraph.loop.ir import (
    Allocate,
    AllReduce,
    Barrier,
    Block,
    BufferStore,
    For,
    Func,
    IfThenElse,
    Prefetch,
    Seq,
    Stmt,
    TileProduct,
)
from tilegraph.te.expr import BufferLoad, Expr
from tilegraph.te.visit import preorder, uses_var
from tilegraph.te.visit import walk as walk_expr


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    if isinstance(s, (BufferStore, Barrier, AllReduce, TileProduct, Prefetch)):
        return ()
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, IfThenElse):
        return (s.then_body,) if s.else_body is None else (s.then_body, s.else_body)
    if isinstance(s, (For, Allocate)):
        return (s.body,)
    if isinstance(s, Block):
        return (s.body,) if s.init is None else (s.init, s.body)
    raise TypeError(f"not a statement node: {type(s).__name__}")


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions held directly by one statement node, not its children: a store's indices
    and value, a condition, a block's bindings and predicate. The one answer to "what does this
    statement compute with" (map_stmt_exprs rewrites exactly these)."""
    if isinstance(s, BufferStore):
        return (*s.indices, s.value)
    if isinstance(s, IfThenElse):
        return (s.cond,)
    if isinstance(s, Block):
        return (*s.bindings, s.predicate)
    if isinstance(s, TileProduct):  # where its tiles start; their loads are not expressions
        return (s.acc_at, s.a_at, s.b_at)
    if isinstance(s, Prefetch):  # an address: it loads nothing
        return (s.index,)
    return ()


def loads_under(s: Stmt) -> Iterator[BufferLoad]:
    """Every buffer load in the expressions of `s` and the statements below it (a tile product's
    reads of its three buffers as loads at their tiles' origins)."""
    for x in walk_stmts(s):
        if isinstance(x, TileProduct):
            yield from (BufferLoad(x.acc, (x.acc_at,)), BufferLoad(x.a, (x.a_at,)), BufferLoad(x.b, (x.b_at,)))
        for e in stmt_exprs(x):
            for node in walk_expr(e):
                if isinstance(node, BufferLoad):
                    yield node


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    """All statements under `s`, parents first, children in order (te/visit.py's preorder)."""
    return preorder(s, stmt_children)


def find_loop(func: Func, name: str) -> For:
    for s in walk_stmts(func.body):
        if isinstance(s, For) and s.var.name == name:
            return s
    raise KeyError(name)


def find_block(func: Func, name: str) -> Block:
    for s in walk_stmts(func.body):
        if isinstance(s, Block) and s.name == name:
            return s
    raise KeyError(name)


def blocks(s: Stmt) -> list[Block]:
    return [x for x in walk_stmts(s) if isinstance(x, Block)]


def loops_above(func: Func, block_name: str) -> list[For]:
    """The loops enclosing a block, outermost first."""
    path: list[For] = []

    def go(s: Stmt) -> bool:
        if isinstance(s, Block) and s.name == block_name:
            return True
        if isinstance(s, For):
            path.append(s)
            if go(s.body):
                return True
            path.pop()
            return False
        return any(go(k) for k in stmt_children(s))

    if not go(func.body):
        raise KeyError(block_name)
    return path


def loop_names(func: Func) -> set[str]:
    return {s.var.name for s in walk_stmts(func.body) if isinstance(s, For)}


def reduce_loop_of(loop: For) -> list[str]:
    """Names of blocks under `loop` in which the loop variable feeds a reduce iteration variable."""
    out = []
    for b in blocks(loop.body):
        for iv, bind in zip(b.iter_vars, b.bindings):
            if iv.kind == "reduce" and uses_var(bind, loop.var):
                out.append(b.name)
                break
    return out
