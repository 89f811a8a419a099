"""with_unique_names: a te DAG whose compute tensors all have distinct names.

A Workload refuses two tensors with one name, and each op names its result after itself: two
`add` nodes composed into one fused kernel both produce a tensor "add". This rebuilds the
computes that collide (and those reading them) under fresh names; placeholders are kept.

    a = ops.add(x, y); b = ops.add(a, z)          # both named "add"
    (b2,) = with_unique_names([b])                # b2 reads a copy of `a` named "add_1"
    Workload([x, y, z], [b2])                     # now legal
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tilegraph.te.expr import Expr, TensorRead
from tilegraph.te.tensor import ComputeOp, Tensor
from tilegraph.te.visit import rewrite
from tilegraph.te.workload import topological


def with_unique_names(outputs: Sequence[Tensor], names: Mapping[int, str] | None = None) -> tuple[Tensor, ...]:
    """`outputs` rebuilt so that no two tensors of their DAG share a name. `names` forces the name
    of some tensors (by id of the original tensor); placeholders must already be unique."""
    forced = dict(names or {})
    taken: set[str] = set()
    copies: dict[int, Tensor] = {}

    def fresh(base: str) -> str:
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        return name

    order = topological(outputs)
    taken.update(forced.values())
    for t in order:
        if t.is_placeholder:
            if t.name in taken and id(t) not in forced:
                raise ValueError(f"two tensors named {t.name!r}, one a placeholder: name placeholders uniquely")
            taken.add(t.name)
            copies[id(t)] = t
    for t in order:
        if t.is_placeholder:
            continue
        name = forced[id(t)] if id(t) in forced else fresh(t.name)
        op = t.op
        assert isinstance(op, ComputeOp)

        def swap(e: Expr) -> Expr | None:
            if isinstance(e, TensorRead) and copies.get(id(e.tensor)) is not e.tensor:
                return TensorRead(copies[id(e.tensor)], e.indices)
            return None

        body = rewrite(op.body, swap)
        if name == t.name and body is op.body:
            copies[id(t)] = t
        else:
            copies[id(t)] = Tensor(t.shape, t.dtype, name, ComputeOp(op.axes, body, op.tag, op.attrs), t.bounds)
    return tuple(copies[id(t)] for t in outputs)


__all__ = ["with_unique_names"]
