"""tensor_value: the loop-IR expression of a te tensor at given indices, with every injective
compute inlined down to placeholders (which become loads of their buffers).

    y = ops.relu(ops.add(x, b))            # x (4, 8), b (8,)
    tensor_value(y, (i, j), {x: X, b: B})  ->  max(X[i, j] + B[j], 0.0f)

`replace` maps tensors to fixed values: the epilogue of a fused kernel replaces the anchor's
output by the value its store computes. A reduction met on the way is refused (ValueError): only
injective computes are inlined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tilegraph.loop.ir import Buffer
from tilegraph.te.expr import BufferLoad, Expr, Reduce, TensorRead
from tilegraph.te.tensor import Tensor
from tilegraph.te.visit import rewrite, substitute


def tensor_value(t: Tensor, indices: Sequence[Expr], buffers: Mapping[int, Buffer],
                 replace: Mapping[int, Callable[[tuple[Expr, ...]], Expr]] | None = None) -> Expr:
    """t[indices] as an expression over the buffers of placeholders (keyed by id of the tensor)."""
    replace = replace or {}
    idx = tuple(indices)
    if id(t) in replace:
        return replace[id(t)](idx)
    if t.is_placeholder:
        if id(t) not in buffers:
            raise ValueError(f"placeholder {t.name} has no buffer in the fused kernel")
        return BufferLoad(buffers[id(t)], idx)
    op = t.op
    if isinstance(op.body, Reduce):  # type: ignore[union-attr]
        raise ValueError(f"{t.name} is a reduction; only injective computes can be inlined")
    body = substitute(op.body, {a.var: i for a, i in zip(op.axes, idx)})  # type: ignore[union-attr]

    def inline(e: Expr) -> Expr | None:
        if isinstance(e, TensorRead):
            return tensor_value(e.tensor, e.indices, buffers, replace)
        return None

    return rewrite(body, inline)


__all__ = ["tensor_value"]
