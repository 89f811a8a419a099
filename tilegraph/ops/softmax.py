"""Softmax along one axis, in four stages (o = the other axes, r = the softmax axis):

    max[o]    = max_r x[o, r]
    exp[o, r] = exp(x[o, r] - max[o])
    expsum[o] = sum_r exp[o, r]
    out[o, r] = exp[o, r] / expsum[o]

The exponential is a stage of its own, computed once and read twice (schedule/defaults.py keeps a
math stage a reduction reads from being inlined): recomputing it in `out` cost softmax 30-45%.
"""

from __future__ import annotations

from tilegraph import te
from tilegraph.ops._common import check_float, check_tensor, normalize_axis, operator, stage
from tilegraph.te.expr import Expr
from tilegraph.te.tensor import Tensor


@operator("softmax")
def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis`."""
    check_tensor(x, "x")
    check_float(x, "x")
    ax = normalize_axis(axis, x.ndim)
    outer_shape = tuple(s for d, s in enumerate(x.extents) if d != ax) or (1,)
    outer_rank = x.ndim - 1

    def with_axis(o: tuple[Expr, ...], r: Expr) -> tuple[Expr, ...]:
        o = o[:outer_rank]
        return (*o[:ax], r, *o[ax:])

    def outer_of(idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return tuple(i for d, i in enumerate(idx) if d != ax) or (0,)

    r_max = te.reduce_axis(x.extents[ax], "r")
    row_max = stage(outer_shape, lambda *o: te.max(x[with_axis(o, r_max)], axis=r_max), name=f"{name}_max")
    exps = stage(x.extents, lambda *idx: te.exp(x[idx] - row_max[outer_of(idx)]), name=f"{name}_exp")
    r_sum = te.reduce_axis(x.extents[ax], "r")
    expsum = stage(outer_shape, lambda *o: te.sum(exps[with_axis(o, r_sum)], axis=r_sum), name=f"{name}_expsum")

    def normalised(*idx: Expr) -> Expr:
        return exps[idx] / expsum[outer_of(idx)]

    return stage(x.extents, normalised, name=name)
