"""Tree editing shared by the primitives that move, create or remove loop nests
(cache_read, cache_write, compute_at, reverse_compute_at, compute_inline, decompose_reduction).

A block's *nest* is its highest enclosing statement that holds no other block: removing the nest
removes the block and the loops that exist only for it.
"""

from __future__ import annotations

from collections.abc import Callable

from tilegraph.errors import ScheduleError
from tilegraph.loop.edit import replace_node
from tilegraph.loop.ir import TRUE, Block, BlockVar, Buffer, BufferStore, For, Func, Seq, Stmt, seq
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import blocks, loads_under, loop_names, stmt_children, walk_stmts
from tilegraph.te.expr import BufferLoad, Expr, Var, binary
from tilegraph.te.simplify import simplify


def path_to(func: Func, target: Stmt) -> list[Stmt]:
    """Statements from func.body down to `target` (found by identity), both included."""
    path: list[Stmt] = []

    def go(s: Stmt) -> bool:
        path.append(s)
        if s is target:
            return True
        if any(go(k) for k in stmt_children(s)):
            return True
        path.pop()
        return False

    if not go(func.body):
        raise KeyError("statement not in func")
    return path


def block_nest(func: Func, block: Block) -> tuple[Stmt, Stmt | None]:
    """(the block's nest, the nest's parent or None when the nest is the whole body)."""
    path = path_to(func, block)
    k = len(path) - 1
    while k > 0 and [b.name for b in blocks(path[k - 1])] == [block.name]:
        k -= 1
    return path[k], (path[k - 1] if k > 0 else None)


def remove_nest(func: Func, block: Block) -> Func:
    nest, parent = block_nest(func, block)
    if not isinstance(parent, Seq):
        raise ScheduleError(f"cannot detach block {block.name}: its loops are not in a statement sequence")
    rest = tuple(s for s in parent.stmts if s is not nest)
    return replace_node(func, parent, seq(*rest))


def insert_beside(func: Func, anchor: Stmt, new: Stmt, after: bool) -> Func:
    """Place `new` right before (or after) `anchor`, which stays where it is."""
    path = path_to(func, anchor)
    parent = path[-2] if len(path) > 1 else None
    if isinstance(parent, Seq):
        stmts: list[Stmt] = []
        for s in parent.stmts:
            stmts.extend([s, new] if (s is anchor and after) else [new, s] if s is anchor else [s])
        return replace_node(func, parent, Seq(tuple(stmts)))
    pair = seq(anchor, new) if after else seq(new, anchor)
    return replace_node(func, anchor, pair)


def root_stmt(func: Func, block_name: str) -> Stmt:
    """The top-level statement of func.body that holds the block."""
    top = func.body.stmts if isinstance(func.body, Seq) else (func.body,)
    for s in top:
        if block_name in {b.name for b in blocks(s)}:
            return s
    raise ScheduleError(f"no block named {block_name!r}")


def child_holding(stmt_body: Stmt, pred: Callable[[Stmt], bool], last: bool = False) -> Stmt | None:
    """The first (or last) statement of a body (a Seq's items, else the body itself) satisfying pred."""
    items = stmt_body.stmts if isinstance(stmt_body, Seq) else (stmt_body,)
    hits = [s for s in items if pred(s)]
    if not hits:
        return None
    return hits[-1] if last else hits[0]


# ------------------------------------------------------------------------------ buffer uses
def block_reads(b: Block, buffer_name: str) -> bool:
    """Whether the block's body or init loads `buffer_name` (its bindings and predicate are loop
    arithmetic, never loads)."""
    return any(load.buffer.name == buffer_name for s in stmt_children(b) for load in loads_under(s))


def block_writes(b: Block, buffer_name: str) -> bool:
    return any(isinstance(s, BufferStore) and s.buffer.name == buffer_name for s in walk_stmts(b))


def readers(s: Stmt, buffer_name: str) -> list[str]:
    return [b.name for b in blocks(s) if block_reads(b, buffer_name)]


def writers(s: Stmt, buffer_name: str) -> list[str]:
    return [b.name for b in blocks(s) if block_writes(b, buffer_name)]


def stored_buffers(b: Block) -> list[Buffer]:
    out: dict[str, Buffer] = {}
    for s in walk_stmts(b):
        if isinstance(s, BufferStore):
            out.setdefault(s.buffer.name, s.buffer)
    return list(out.values())


def is_alloc(func: Func, name: str) -> bool:
    return any(b.name == name for b in func.allocs)


def check_dataflow(func: Func, what: str) -> None:
    """Every block that reads a buffer without writing it comes after all of the buffer's writers
    in program order; a primitive whose result breaks this would read values not computed yet."""
    order = blocks(func.body)
    position = {b.name: n for n, b in enumerate(order)}
    for buf in func.buffers:
        ws = [b for b in order if block_writes(b, buf.name)]
        if not ws:
            continue
        last_writer = max(position[w.name] for w in ws)
        for b in order:
            if position[b.name] < last_writer and block_reads(b, buf.name) and not block_writes(b, buf.name):
                raise ScheduleError(f"{what}: block {b.name} would read {buf.name} before block "
                                    f"{order[last_writer].name} writes it")


# ------------------------------------------------------------------------------ building nests
def fresh_buffer_name(func: Func, base: str) -> str:
    taken = {b.name for b in func.buffers} | {b.name for b in blocks(func.body)}
    return fresh_name(base, taken)


def fresh_block_name(func: Func, base: str) -> str:
    return fresh_buffer_name(func, base)


def fresh_loop_vars(func: Func, bases: list[str]) -> list[Var]:
    taken = set(loop_names(func))
    out = []
    for base in bases:
        name = fresh_name(base, taken)
        taken.add(name)
        out.append(Var(name))
    return out


def copy_nest(func: Func, name: str, dst: Buffer, src: Buffer,
              src_index: Callable[[tuple[Var, ...]], tuple[Expr, ...]]) -> tuple[Stmt, str]:
    """for ax0.., ax1..: block name: dst[v0, v1, ...] = src[src_index(v0, v1, ...)], over dst's shape."""
    iter_vars = tuple(BlockVar(Var(f"v{d}"), n) for d, n in enumerate(dst.shape))
    loop_vars = fresh_loop_vars(func, [f"ax{d}" for d in range(dst.ndim)])
    vs = tuple(iv.var for iv in iter_vars)
    body = BufferStore(dst, vs, BufferLoad(src, tuple(simplify(i) for i in src_index(vs))))
    stmt: Stmt = Block(name, iter_vars, tuple(loop_vars), body)
    for lv, n in reversed(list(zip(loop_vars, dst.shape))):
        stmt = For(lv, n, "serial", stmt)
    return stmt, name


def conjunction(conds: list[Expr]) -> Expr:
    out: Expr = TRUE
    for c in conds:
        out = c if out == TRUE else binary("and", out, c)
    return simplify(out)


def loops_between(func: Func, outer: For, block: Block) -> list[For]:
    """Loops strictly inside `outer` that enclose `block`, outermost first."""
    path = path_to(func, block)
    hits = [i for i, s in enumerate(path) if s is outer]
    if not hits:
        return []
    k = hits[0]
    return [s for s in path[k + 1:] if isinstance(s, For)]


def loops_enclosing(func: Func, target: Stmt) -> list[For]:
    """Loops enclosing `target` (excluded), outermost first."""
    return [s for s in path_to(func, target)[:-1] if isinstance(s, For)]


__all__ = [
    "block_nest", "block_reads", "block_writes", "check_dataflow", "child_holding", "conjunction", "copy_nest",
    "fresh_block_name", "fresh_buffer_name", "fresh_loop_vars", "insert_beside", "is_alloc", "loops_between",
    "loops_enclosing", "path_to", "readers", "remove_nest", "root_stmt",
    "stored_buffers", "writers",
]
