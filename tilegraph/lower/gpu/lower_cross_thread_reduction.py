"""lower_cross_thread_reduction: a reduction whose loop is bound to threadIdx.x (see
schedule/primitives/annotate.py) becomes a per-lane partial result in a register, an AllReduce
across the lanes (warp shuffles on CUDA) and one store of the combined value by every lane.

    for k_1 in range(32) threadIdx.x:                 for k_1 in range(32) threadIdx.x:
      for k_0 in range(4):                              allocate s_lane: float32[1] scope=local
        block s(v_i=i, v_k*=k_0*32 + k_1)      ==>        s_lane[0] = 0.0f
          if v_k < 100:                                   for k_0 in range(4):
          init: s[v_i] = 0.0f                               block s(v_i=i, v_k*=k_0*32 + k_1) if v_k < 100:
          s[v_i] = s[v_i] + x[v_i, v_k]                       s_lane[0] = s_lane[0] + x[v_i, v_k]
                                                          allreduce(s_lane, sum, width=32)
                                                          block s_lanes(v_i=i): s[v_i] = s_lane[0]

Every lane ends with the whole reduction, so every lane stores it (the same value): a consumer in
any lane of the group reads a complete result without a barrier. The partial starts from the
combiner's identity; a block init other than the identity is combined in at the end. The
AllReduce sits outside every block predicate (all lanes must reach it); the final store keeps the
predicate's conjuncts that do not depend on the reduction's loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tilegraph.errors import LoweringError, ScheduleError
from tilegraph.loop.edit import replace_buffer, rewrite_loads, rewrite_stmt
from tilegraph.loop.ir import (
    TRUE,
    Allocate,
    AllReduce,
    Barrier,
    Block,
    BlockVar,
    Buffer,
    BufferStore,
    For,
    Func,
    IfThenElse,
    Seq,
    Stmt,
)
from tilegraph.loop.region import accesses
from tilegraph.loop.verify import THREAD_KINDS as THREAD_LOOP_KINDS
from tilegraph.loop.visit import blocks, loads_under, reduce_loop_of, stmt_children, stmt_exprs, walk_stmts
from tilegraph.schedule.primitives.nest import fresh_buffer_name
from tilegraph.schedule.primitives.rfactor import Reduction, match_reduction
from tilegraph.te.expr import BinOp, BufferLoad, Cmp, Const, Expr, Var, combine, conjuncts, identity_of
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute, uses_var, walk


def run(func: Func, target: object = None) -> Func:
    taken: set[str] = set()
    reduced: dict[str, int] = {}  # buffer -> lanes of its cross-thread reduction

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, For) and s.kind == "threadIdx.x" and reduce_loop_of(s):
            new = _lower(func, s, taken)
            for b in blocks(s.body):
                reduced[match_reduction(b, "").out.name] = s.extent
            return new
        return None

    body = rewrite_stmt(func.body, on_stmt)
    for name, lanes in reduced.items():
        body = _per_thread(body, name, lanes)
    return replace(func, body=body)


def _per_thread(body: Stmt, name: str, lanes: int) -> Stmt:
    """An intermediate the kernel allocates, which every lane of the reduction stores whole, which
    only threadIdx.x loops of the same lanes touch, and always at the one element the reduction
    stored, becomes a local (per-thread) buffer: each thread reads the copy it wrote itself.

    A statement beside those loops that reads it (a matrix-vector product's epilogue at its output,
    schedule/gpu_rows.py) is first given a lanes loop of its own, lane 0 running it (`_in_lane_0`):
    it then reads lane 0's copy, which holds the whole result, and merge_thread_loops joins it to
    the reduction's loop."""
    allocs = [x for x in walk_stmts(body) if isinstance(x, Allocate) and x.buffer.name == name]
    if len(allocs) != 1 or allocs[0].buffer.scope == "local":
        return body
    alloc = _in_lane_0(body, allocs[0], name, lanes)
    users = [x for x in walk_stmts(alloc.body) if isinstance(x, For) and x.kind == "threadIdx.x"
             and (_touches(x, name))]
    outermost = [x for x in users if not any(x is not y and _contains(y, x) for y in users)]
    if not outermost or any(x.extent != lanes for x in outermost) or _touches_outside(alloc.body, name, outermost):
        return body
    enclosing = [x for x in _path(body, allocs[0]) or [] if isinstance(x, For)]
    if len(_indices(alloc.body, name, enclosing)) != 1:  # every access the element its own lanes stored
        return body
    local = replace(alloc.buffer, scope="local")
    new = Allocate(local, replace_buffer(alloc.body, name, local))
    return rewrite_stmt(body, lambda x: new if x is allocs[0] else None)


def _in_lane_0(body: Stmt, alloc: Allocate, name: str, lanes: int) -> Allocate:
    """`alloc` with each statement of its body's sequence that reads `name` beside the lanes loops
    (and holds no thread loop, barrier or AllReduce) wrapped in a lanes loop that runs it in lane 0:

        allocate m: float32[1]                      allocate m: float32[1]
          for k_1 in range(32) threadIdx.x:           for k_1 in range(32) threadIdx.x:
            ... allreduce; m[0] = m_lane[0]    ==>      ... allreduce; m[0] = m_lane[0]
          out[j] = m[0] + b[j]                        for m_l in range(32) threadIdx.x:
                                                        if m_l == 0: out[j] = m[0] + b[j]

    The same meaning (the statement still runs once per thread of the other axes), and on a GPU
    the one lane that runs it reads its own copy. Only inside a kernel (under a blockIdx loop);
    anything else leaves `alloc` as it is."""
    above = _path(body, alloc)
    if above is None or not any(isinstance(x, For) and x.kind.startswith("blockIdx") for x in above):
        return alloc
    items = list(alloc.body.stmts) if isinstance(alloc.body, Seq) else [alloc.body]
    # a reduction's lanes loop, maybe inside loops of one iteration (a row's leading extents of 1)
    lane_loops = [x for x in map(_inside_unit_loops, items)
                  if isinstance(x, For) and x.kind == "threadIdx.x" and x.extent == lanes and _touches(x, name)]
    if not lane_loops:
        return alloc
    changed = False
    for i, item in enumerate(items):
        if any(_inside_unit_loops(item) is x for x in lane_loops) or not any(
                ld.buffer.name == name for ld in loads_under(item)):
            continue
        if any(isinstance(x, (Barrier, AllReduce)) or (isinstance(x, For) and x.kind in THREAD_LOOP_KINDS)
               for x in walk_stmts(item)):
            return alloc
        lane = Var(f"{name}_lane0_{i}", lane_loops[0].var.dtype)
        items[i] = For(lane, lanes, "threadIdx.x", IfThenElse(Cmp("eq", lane, Const(0, lane.dtype)), item))
        changed = True
    return replace(alloc, body=Seq(tuple(items))) if changed else alloc


def _inside_unit_loops(s: Stmt) -> Stmt:
    while isinstance(s, For) and s.kind == "serial" and s.extent == 1:
        s = s.body
    return s


def _path(s: Stmt, target: Stmt) -> list[Stmt] | None:
    """The statements enclosing `target` inside `s` (outermost first), None if it is not there."""
    if s is target:
        return []
    for k in stmt_children(s):
        below = _path(k, target)
        if below is not None:
            return [s, *below]
    return None


def _touches(s: Stmt, name: str) -> bool:
    return any(isinstance(x, BufferStore) and x.buffer.name == name for x in walk_stmts(s)) or any(
        x.buffer.name == name for x in loads_under(s))


def _indices(s: Stmt, name: str, enclosing: Sequence[For] = ()) -> set[tuple[Expr, ...]]:
    """The indices of every access to `name`, in loop variables (block bindings substituted; loops
    of one iteration, as compute_at leaves for a row, at 0, also the `enclosing` loops around `s`)."""
    out = set()
    for acc in accesses(s, name):
        unit = {lp.var: Const(0) for lp in (*enclosing, *acc.loops) if lp.extent == 1}
        out.add(tuple(simplify(substitute(i, unit)) for i in acc.indices))
    return out


def _contains(outer: Stmt, inner: Stmt) -> bool:
    return any(x is inner for x in walk_stmts(outer))


def _touches_outside(s: Stmt, name: str, loops: list[For]) -> bool:
    """Whether `s` accesses `name` anywhere but inside `loops`."""
    if any(s is lp for lp in loops):
        return False
    if isinstance(s, BufferStore):
        return _touches(s, name)
    if any(isinstance(x, BufferLoad) and x.buffer.name == name for e in stmt_exprs(s) for x in walk(e)):
        return True
    return any(_touches_outside(k, name, loops) for k in stmt_children(s))


def _lower(func: Func, lp: For, taken: set[str]) -> Stmt:
    where = f"cross-thread reduction over {lp.var.name}"
    inner = blocks(lp.body)
    if len(inner) != 1:
        raise LoweringError(f"{where}: the loop holds {len(inner)} blocks; a cross-thread reduction needs one")
    block = inner[0]
    try:
        red = match_reduction(block, where)
    except ScheduleError as e:
        raise LoweringError(str(e)) from None
    driving = [x.var for x in walk_stmts(lp) if isinstance(x, For)]
    name = fresh_buffer_name(func, f"{red.out.name}_lane")
    while name in taken:
        name = fresh_buffer_name(func, f"{name}_")
    taken.add(name)
    lane = Buffer(name, (1,), red.out.dtype, "local")
    acc = BufferLoad(lane, (Const(0),))

    def to_lane(s: Stmt) -> Stmt | None:
        if isinstance(s, BufferStore) and s.buffer.name == red.out.name:
            value = rewrite_loads(s.value, lambda x: acc if x.buffer.name == red.out.name else None)
            return BufferStore(lane, (Const(0),), value)
        return None

    partial = replace(block, body=rewrite_stmt(block.body, to_lane), init=None)
    body = rewrite_stmt(lp.body, lambda s: partial if s is block else None)
    start = BufferStore(lane, (Const(0),), identity_of(red.combiner, red.out.dtype))
    exchange = AllReduce(lane, red.combiner, lp.extent)
    final = _final_store(block, red, acc, driving, f"{block.name}_lanes")
    return replace(lp, body=Allocate(lane, Seq((start, body, exchange, final))))


def _final_store(block: Block, red: Reduction, acc: Expr, driving: list[Var], name: str) -> Block:
    init_value = block.init.value if isinstance(block.init, BufferStore) else None
    identity = identity_of(red.combiner, red.out.dtype)
    value = acc if init_value is None or init_value == identity else combine(red.combiner, init_value, acc)
    keep = [(iv, b) for iv, b in zip(block.iter_vars, block.bindings) if iv.kind == "spatial"]
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "reduce"}
    kept = [c for c in conjuncts(block.predicate) if not any(uses_var(c, v) for v in (*driving, *reduce_vars))]
    predicate: Expr = TRUE
    for c in kept:
        predicate = c if predicate is TRUE else BinOp("and", predicate, c)
    store: Stmt = BufferStore(red.out, red.indices, value)
    if red.guard is not None and all(not uses_var(red.guard, v) for v in (*driving, *reduce_vars)):
        store = IfThenElse(red.guard, store)
    return Block(name, tuple(BlockVar(iv.var, iv.extent, "spatial") for iv, _ in keep), tuple(b for _, b in keep),
                 store, None, predicate)


__all__ = ["run"]
