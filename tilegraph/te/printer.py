"""Text form of scalar expressions, used by the loop IR printer and the workload key."""

from __future__ import annotations

from collections.abc import Callable

from tilegraph.te.expr import (
    BinOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Not,
    Ramp,
    Reduce,
    Select,
    TensorRead,
    Var,
)

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%",
          "and": "&&", "or": "||"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def expr_str(e: Expr, tensor_name: Callable[[object], str] = lambda t: t.name,
             var_name: Callable[[Var], str] = lambda v: v.name) -> str:
    """A fully parenthesised, unambiguous text form of `e`."""

    def go(x: Expr) -> str:
        if isinstance(x, Var):
            return var_name(x)
        if isinstance(x, Const):
            if x.dtype.is_float:
                return f"{float(x.value)!r}f" if x.dtype.bits == 32 else f"{x.dtype}({float(x.value)!r})"
            return repr(x.value) if x.dtype.name in ("int32", "bool") else f"{x.dtype}({x.value!r})"
        if isinstance(x, BinOp):
            if x.op in _INFIX:
                return f"({go(x.a)} {_INFIX[x.op]} {go(x.b)})"
            return f"{x.op}({go(x.a)}, {go(x.b)})"
        if isinstance(x, Cmp):
            return f"({go(x.a)} {_CMP[x.op]} {go(x.b)})"
        if isinstance(x, Not):
            return f"!{go(x.a)}"
        if isinstance(x, Select):
            return f"select({go(x.cond)}, {go(x.true_value)}, {go(x.false_value)})"
        if isinstance(x, Cast):
            return f"{x.dtype}({go(x.value)})"
        if isinstance(x, Call):
            return f"{x.name}({', '.join(go(a) for a in x.args)})"
        if isinstance(x, TensorRead):
            return f"{tensor_name(x.tensor)}[{', '.join(go(i) for i in x.indices)}]"
        if isinstance(x, BufferLoad):
            return f"{x.buffer.name}[{', '.join(go(i) for i in x.indices)}]"
        if isinstance(x, Reduce):
            axes = ", ".join(f"{var_name(a.var)}:{a.extent}" for a in x.axes)
            extra = ""
            if x.init is not None:
                extra += f", init={go(x.init)}"
            if x.condition is not None:
                extra += f", where={go(x.condition)}"
            return f"{x.combiner}({go(x.source)}, axes=[{axes}]{extra})"
        if isinstance(x, Ramp):
            return f"ramp({go(x.base)}, {x.stride}, {x.lanes})"
        if isinstance(x, Broadcast):
            return f"broadcast({go(x.value)}, {x.lanes})"
        raise TypeError(f"cannot print {type(x).__name__}")

    return go(e)
