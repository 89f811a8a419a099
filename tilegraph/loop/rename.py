"""Rename every name of a Func (buffers, loops, blocks, block variables), position by position.

    name_slots(f)  ->  ("A", "B", "C", "i", "j", "k", "C", "v_i", "v_j", "v_k")
    rename(f, ("X", "Y", "Z", "m", "n", "r", "Z", "v_m", "v_n", "v_r"))

before:                                         after:
    for i in range(M):                              for m in range(M):
      block C(v_i=i, ...):                            block Z(v_m=m, ...):
        C[v_i, v_j] = C[v_i, v_j] + A[...]              Z[v_m, v_n] = Z[v_m, v_n] + X[...]

The slots are the buffers (params, then allocs), then in program order each loop's variable and
each block's name followed by its variables. Two Funcs of workloads with equal keys have equally
many slots, slot by slot the same role, so zipping their slots maps one's names onto the other's
(`Schedule.replay` renames a trace that way). Block variables are local to their block, so they
are renamed block by block; loop, block and buffer names are unique in a Func.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tilegraph.loop.edit import stmt_with_children
from tilegraph.loop.ir import Allocate, Block, BlockVar, Buffer, BufferStore, For, Func, IfThenElse, Stmt
from tilegraph.loop.visit import stmt_children, walk_stmts
from tilegraph.te.expr import BufferLoad, Expr, Var
from tilegraph.te.visit import rewrite


def name_slots(func: Func) -> tuple[str, ...]:
    """Every name of `func` in slot order (see the module docstring)."""
    out = [b.name for b in func.buffers]
    for s in walk_stmts(func.body):
        if isinstance(s, For):
            out.append(s.var.name)
        elif isinstance(s, Block):
            out.append(s.name)
            out.extend(iv.var.name for iv in s.iter_vars)
    return tuple(out)


def rename(func: Func, names: Sequence[str]) -> Func:
    """`func` with the name in each slot replaced by `names` at the same position."""
    slots = name_slots(func)
    if len(names) != len(slots):
        raise ValueError(f"{len(names)} names for the {len(slots)} names of {func.name}")
    new_names = iter(names)
    buffers = {b.name: replace(b, name=next(new_names)) for b in func.buffers}
    renamer = _Renamer(buffers, new_names)
    body = renamer.stmt(func.body, {})
    return Func(func.name, tuple(buffers[b.name] for b in func.params), body,
                tuple(buffers[b.name] for b in func.allocs), func.attrs)


class _Renamer:
    def __init__(self, buffers: dict[str, Buffer], names: object):
        self.buffers = buffers
        self.names = names  # an iterator over the loop/block slots, consumed in program order

    def expr(self, e: Expr, variables: dict[str, str]) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, Var) and x.name in variables:
                return Var(variables[x.name], x.dtype)
            if isinstance(x, BufferLoad) and x.buffer.name in self.buffers:
                return BufferLoad(self.buffers[x.buffer.name], x.indices)
            return None

        return rewrite(e, fn)

    def stmt(self, s: Stmt, variables: dict[str, str]) -> Stmt:
        """Rename top-down, so names are consumed in the order `name_slots` lists them."""
        if isinstance(s, For):
            name = next(self.names)  # type: ignore[call-overload]
            inner = {**variables, s.var.name: name}
            return For(Var(name, s.var.dtype), s.extent, s.kind, self.stmt(s.body, inner))
        if isinstance(s, Block):
            name = next(self.names)  # type: ignore[call-overload]
            iter_vars = tuple(BlockVar(Var(next(self.names), iv.var.dtype), iv.extent, iv.kind)  # type: ignore[call-overload]
                              for iv in s.iter_vars)
            inner = {**variables, **{old.var.name: new.var.name for old, new in zip(s.iter_vars, iter_vars)}}
            init = None if s.init is None else self.stmt(s.init, inner)
            return Block(name, iter_vars, tuple(self.expr(b, variables) for b in s.bindings), self.stmt(s.body, inner),
                         init, self.expr(s.predicate, variables))
        if isinstance(s, BufferStore):
            return BufferStore(self.buffers.get(s.buffer.name, s.buffer), tuple(self.expr(i, variables) for i in s.indices),
                               self.expr(s.value, variables))
        if isinstance(s, Allocate):
            return Allocate(self.buffers.get(s.buffer.name, s.buffer), self.stmt(s.body, variables))
        kids = stmt_children(s)
        s = stmt_with_children(s, tuple(self.stmt(k, variables) for k in kids)) if kids else s
        if isinstance(s, IfThenElse):
            s = replace(s, cond=self.expr(s.cond, variables))
        return s
