"""Workload: a te DAG with a fixed argument order, and its structural key.

The key is the sha256 of a canonical text in which tensors are renamed by topological position
and axis variables by position within their compute, so equal definitions built separately get
equal keys, while the user's names stay available for printing and code generation. Only the
computation counts: shapes, dtypes and expression structure. Tags and attrs (the op library's
reference-test metadata) are labels and stay outside the key, so `ops.matmul(A, B)` and the same
`te.compute` written by hand, or built by a graph frontend, share their tuning records.

`constants` names the inputs that stay fixed for the kernel's lifetime (a model's weights): a
kernel that packs such an input at every call gets it packed once instead (lower/prepack.py), so
tuning times it without the packing, as the model runs it. They enter the key (the same matmul
with a constant B is another task: its best schedule may differ), and `plain` is the workload
without them (whose records serve where the constant one has none).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cached_property

from tilegraph.errors import WorkloadError
from tilegraph.te.expr import Reduce, Var
from tilegraph.te.printer import expr_str
from tilegraph.te.tensor import ComputeOp, Tensor


def key_of_canonical_text(text: str) -> str:
    """The workload key of a canonical text (`Workload.canonical_text`)."""
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def topological(roots: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """`roots` and every tensor they read, producers first (each once, in first-visit order)."""
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for producer in t.inputs:
            visit(producer)
        order.append(t)

    for t in roots:
        visit(t)
    return tuple(order)


class Workload:
    """The unit of compilation and tuning: inputs -> outputs through compute tensors."""

    def __init__(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor], name: str | None = None,
                 constants: Sequence[int] = ()):
        self.inputs: tuple[Tensor, ...] = tuple(inputs)
        if any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.inputs) for i in constants):
            raise WorkloadError(f"constants must be positions of inputs (0..{len(self.inputs) - 1}), got {list(constants)}")
        self.constants: tuple[int, ...] = tuple(sorted(set(constants)))
        self.outputs: tuple[Tensor, ...] = tuple(outputs)
        if not self.outputs:
            raise WorkloadError("a workload needs at least one output")
        for t in self.outputs:
            if t.is_placeholder:
                raise WorkloadError(f"output {t.name} is a placeholder; outputs must be computed")
        self.tensors: tuple[Tensor, ...] = self._topo_order()
        reached_inputs = [t for t in self.tensors if t.is_placeholder]
        given = {id(t) for t in self.inputs}
        missing = [t.name for t in reached_inputs if id(t) not in given]
        if missing:
            raise WorkloadError(f"the outputs read placeholders not listed as inputs: {missing}")
        if len(given) != len(self.inputs):
            raise WorkloadError("a tensor is listed twice among the inputs")
        names = [t.name for t in self.tensors]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise WorkloadError(f"two different tensors share the name(s) {dup}; give each a unique name")
        last = self.outputs[-1].op
        self.op_name: str = name or (last.tag if isinstance(last, ComputeOp) and last.tag else self.outputs[-1].name)

    def _topo_order(self) -> tuple[Tensor, ...]:
        return topological((*self.inputs, *self.outputs))

    @property
    def computes(self) -> tuple[Tensor, ...]:
        """Compute tensors in topological order (producers first)."""
        return tuple(t for t in self.tensors if not t.is_placeholder)

    @property
    def intermediates(self) -> tuple[Tensor, ...]:
        outs = {id(t) for t in self.outputs}
        return tuple(t for t in self.computes if id(t) not in outs)

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {t.name: t.shape for t in (*self.inputs, *self.outputs)}

    @cached_property
    def canonical_text(self) -> str:
        """The text the key hashes: names replaced by positions, tags and attrs left out, so only
        the computation counts."""
        position = {id(t): i for i, t in enumerate(self.tensors)}
        role = {id(t): f"in{i}" for i, t in enumerate(self.inputs)}
        role.update({id(t): f"out{i}" for i, t in enumerate(self.outputs)})
        lines = []
        for t in self.tensors:
            head = f"T{position[id(t)]}:{role.get(id(t), 'tmp')}:{t.dtype}{list(t.shape)}"
            if t.is_placeholder:
                lines.append(head)
                continue
            op = t.op
            var_names: dict[Var, str] = {a.var: f"s{i}" for i, a in enumerate(op.axes)}
            if isinstance(op.body, Reduce):
                var_names.update({a.var: f"r{i}" for i, a in enumerate(op.body.axes)})
            body = expr_str(op.body, tensor_name=lambda x: f"T{position[id(x)]}",
                            var_name=lambda v, names=var_names: names.get(v, v.name))
            lines.append(f"{head} = {body}")
        if self.constants:
            lines.append("constants: " + ",".join(f"in{i}" for i in self.constants))
        return "\n".join(lines)

    @cached_property
    def plain(self) -> Workload:
        """This workload with no input marked constant (itself when none is)."""
        return Workload(self.inputs, self.outputs, self.op_name) if self.constants else self

    @cached_property
    def key(self) -> str:
        """Structural hash: equal for equal definitions, whatever names the user chose."""
        return key_of_canonical_text(self.canonical_text)

    def flops(self) -> int:
        """Floating-point operations of one run: 2 per multiply-add in reductions, 1 per element otherwise."""
        total = 0
        for t in self.computes:
            n = 1
            for s in t.shape:
                n *= s
            if isinstance(t.op.body, Reduce):
                r = 1
                for a in t.op.body.axes:
                    r *= a.extent
                total += 2 * n * r
            else:
                total += n
        return total

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}{list(t.shape)}" for t in self.outputs)
        return f"Workload({self.op_name}: {ins} -> {outs}, key={self.key})"
