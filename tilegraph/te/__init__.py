"""Tensor expressions: what a computation is, before any decision about how to run it."""

from tilegraph.te.expr import (
    BinOp,
    BufferLoad,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    IterVar,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
    abs_,
    all_of,
    call,
    cast,
    ceil,
    const,
    erf,
    exp,
    floor,
    log,
    logical_and,
    logical_not,
    logical_or,
    max_,
    min_,
    power,
    round_,
    rsqrt,
    select,
    sigmoid,
    sqrt,
    tanh,
)
from tilegraph.te.tensor import ComputeOp, PlaceholderOp, Tensor, compute, max, min, placeholder, reduce_axis, sum
from tilegraph.te.workload import Workload

__all__ = [
    "BinOp", "BufferLoad", "Call", "Cast", "Cmp", "Const", "Expr", "IterVar", "Not", "Reduce", "Select",
    "TensorRead", "Var", "abs_", "all_of", "call", "cast", "ceil", "const", "erf", "exp", "floor", "log",
    "logical_and", "logical_not", "logical_or", "max_", "min_", "power", "round_", "rsqrt", "select", "sigmoid",
    "sqrt", "tanh", "ComputeOp", "PlaceholderOp", "Tensor", "compute", "max", "min", "placeholder",
    "reduce_axis", "sum", "Workload",
]
