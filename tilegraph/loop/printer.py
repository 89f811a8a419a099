"""Canonical text form of a loop-IR function (logs, golden tests, debugging dumps)."""

from __future__ import annotations

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
from tilegraph.te.expr import Const
from tilegraph.te.printer import expr_str


def func_str(func: Func) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in func.params)
    lines = [f"func {func.name}({params}):"]
    for b in func.allocs:
        pad = f" padding={list(b.padding)}" if b.padding else ""
        lines.append(f"  alloc {b.name}: {b.dtype}{list(b.shape)} scope={b.scope}{pad}")
    _emit(func.body, 1, lines)
    return "\n".join(lines)


def stmt_str(s: Stmt) -> str:
    lines: list[str] = []
    _emit(s, 0, lines)
    return "\n".join(lines)


def _emit(s: Stmt, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(s, Seq):
        for x in s.stmts:
            _emit(x, depth, out)
    elif isinstance(s, For):
        kind = "" if s.kind == "serial" else f" {s.kind}"
        out.append(f"{pad}for {s.var.name} in range({s.extent}){kind}:")
        _emit(s.body, depth + 1, out)
    elif isinstance(s, Block):
        binds = ", ".join(
            f"{iv.var.name}{'*' if iv.kind == 'reduce' else ''}={expr_str(b)}"
            for iv, b in zip(s.iter_vars, s.bindings)
        )
        pred = "" if isinstance(s.predicate, Const) and s.predicate.value is True else f" if {expr_str(s.predicate)}"
        out.append(f"{pad}block {s.name}({binds}){pred}:")
        if s.init is not None:
            out.append(f"{pad}  init:")
            _emit(s.init, depth + 2, out)
        _emit(s.body, depth + 1, out)
    elif isinstance(s, BufferStore):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}")
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if {expr_str(s.cond)}:")
        _emit(s.then_body, depth + 1, out)
        if s.else_body is not None:
            out.append(f"{pad}else:")
            _emit(s.else_body, depth + 1, out)
    elif isinstance(s, Allocate):
        b = s.buffer
        out.append(f"{pad}allocate {b.name}: {b.dtype}{list(b.storage_shape)} scope={b.scope}")
        _emit(s.body, depth + 1, out)
    elif isinstance(s, Barrier):
        out.append(f"{pad}barrier({s.scope})")
    elif isinstance(s, AllReduce):
        out.append(f"{pad}allreduce({s.buffer.name}, {s.combiner}, width={s.width})")
    elif isinstance(s, TileProduct):
        steps = " x ".join(f"{e}(a+{sa}, b+{sb})" for e, sa, sb in s.steps) or "1"
        tiles = ", ".join(f"{r}@{o}" for r, o in s.a_tiles)
        out.append(f"{pad}tile_product({s.acc.name}[{expr_str(s.acc_at)}, ld {s.acc_ld}] {'=' if s.zero else '+='} "
                   f"{s.a.name}[{expr_str(s.a_at)}, ld {s.a_ld}, rows {tiles}] . "
                   f"{s.b.name}[{expr_str(s.b_at)}, ld {s.b_ld}, groups of {s.group}], "
                   f"{s.rows} x {s.cols} x {s.depth}, steps {steps})")
    elif isinstance(s, Prefetch):
        out.append(f"{pad}prefetch({s.buffer.name}[{expr_str(s.index)}], lines={s.lines}, locality={s.locality})")
    else:
        raise TypeError(f"cannot print {type(s).__name__}")
