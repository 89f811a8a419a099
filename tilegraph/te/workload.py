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
from collections.abc import Mapping, Sequence
from functools import cached_property

from tilegraph import dtype as dt
from tilegraph.errors import WorkloadError
from tilegraph.te.dims import DIMS_INPUT, Dim, check_values, dims_of, value_of
from tilegraph.te.expr import IterVar, Reduce, Var
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


def _dims_of(outputs: Sequence[Tensor]) -> tuple[Dim, ...]:
    """Every run-time dim the computation of `outputs` mentions, sorted by name; two dims of one
    name with different ranges are refused."""
    found: set[Dim] = set()
    for t in topological(outputs):
        exprs = [b for b in t.bounds if b is not None]
        if isinstance(t.op, ComputeOp):
            exprs.append(t.op.body)
            axes = (*t.op.axes, *(t.op.body.axes if isinstance(t.op.body, Reduce) else ()))
            exprs += [a.bound for a in axes if a.bound is not None]
        for e in exprs:
            found |= dims_of(e)
    by_name: dict[str, Dim] = {}
    for d in sorted(found, key=lambda d: (d.name, d.lower, d.upper)):
        if d.name in by_name:
            other = by_name[d.name]
            raise WorkloadError(f"dim {d.name!r} is declared twice, with ranges [{other.lower}, {other.upper}] and "
                                f"[{d.lower}, {d.upper}]")
        by_name[d.name] = d
    return tuple(by_name.values())


def _dims_at(dims: tuple[Dim, ...], values: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
    """`values` checked against the dims' ranges, without those at their upper bound (the default),
    sorted by name."""
    if not values:
        return ()
    by_name = {d.name: d for d in dims}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise WorkloadError(f"dims_at names {unknown}, which are not dims of this workload ({sorted(by_name)})")
    try:
        check_values([by_name[n] for n in values], values)
    except (TypeError, ValueError) as e:
        raise WorkloadError(f"dims_at: {e}") from None
    return tuple(sorted((n, int(v)) for n, v in values.items() if int(v) != by_name[n].upper))


def _with_dims_input(inputs: tuple[Tensor, ...], dims: tuple[Dim, ...]) -> tuple[Tensor, ...]:
    """`inputs` ending with the dims' input (added where it is not there yet)."""
    if not dims:
        return inputs
    if inputs and inputs[-1].name == DIMS_INPUT:
        last = inputs[-1]
        if last.shape != (len(dims),) or last.dtype != dt.int32:
            raise WorkloadError(f"input {DIMS_INPUT} must be int32[{len(dims)}], got {last.dtype}{list(last.shape)}")
        return inputs
    if any(t.name == DIMS_INPUT for t in inputs):
        raise WorkloadError(f"the name {DIMS_INPUT} is reserved for the run-time dims' input (the last one)")
    return (*inputs, Tensor((len(dims),), dt.int32, DIMS_INPUT))


class Workload:
    """The unit of compilation and tuning: inputs -> outputs through compute tensors."""

    def __init__(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor], name: str | None = None,
                 constants: Sequence[int] = (), dims_at: Mapping[str, int] | None = None):
        self.dims: tuple[Dim, ...] = _dims_of(outputs)
        self.inputs: tuple[Tensor, ...] = _with_dims_input(tuple(inputs), self.dims)
        # the run-time dims' values a tuner measures at (a bucket's upper bound), by default their uppers
        self.dims_at: tuple[tuple[str, int], ...] = _dims_at(self.dims, dims_at)
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

    @property
    def dims_input(self) -> Tensor | None:
        """The input holding the run-time dims' values (te/dims.py), or None without dims."""
        return self.inputs[-1] if self.dims else None

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
        dim_names: dict[Var, str] = {d: f"d{i}" for i, d in enumerate(self.dims)}
        lines = [f"dims: {','.join(f'd{i}<={d.upper}' for i, d in enumerate(self.dims))}"] if self.dims else []
        for t in self.tensors:
            head = f"T{position[id(t)]}:{role.get(id(t), 'tmp')}:{t.dtype}{list(t.shape)}"
            if t.bounds:
                head += "{" + ",".join("_" if b is None else expr_str(b, var_name=dim_names.get) for b in t.bounds) + "}"
            if t.is_placeholder:
                lines.append(head)
                continue
            op = t.op
            var_names: dict[Var, str] = {a.var: f"s{i}" for i, a in enumerate(op.axes)}
            var_names.update(dim_names)
            if isinstance(op.body, Reduce):
                var_names.update({a.var: f"r{i}" for i, a in enumerate(op.body.axes)})
                reduce_bounds = [expr_str(a.bound, var_name=dim_names.get) for a in op.body.axes if a.bound is not None]
                if reduce_bounds:
                    head += "{r:" + ",".join(reduce_bounds) + "}"
            body = expr_str(op.body, tensor_name=lambda x: f"T{position[id(x)]}",
                            var_name=lambda v, names=var_names: names.get(v, v.name))
            lines.append(f"{head} = {body}")
        if self.constants:
            lines.append("constants: " + ",".join(f"in{i}" for i in self.constants))
        if self.dims_at:
            at = dict(self.dims_at)
            lines.append("at: " + ",".join(f"d{i}={at[d.name]}" for i, d in enumerate(self.dims) if d.name in at))
        return "\n".join(lines)

    @cached_property
    def plain(self) -> Workload:
        """This workload with no input marked constant (itself when none is)."""
        if not self.constants:
            return self
        return Workload(self.inputs, self.outputs, self.op_name, dims_at=dict(self.dims_at) or None)

    def at(self, values: Mapping[str, int]) -> Workload:
        """This computation measured with its run-time dims at `values` (a bucket of the range, tuned
        at its upper bound: te/dims.py); dims not named stay at their uppers. Another key: a
        bucket's records are its own, while its kernels take the same arrays as every bucket's."""
        merged = {**dict(self.dims_at), **dict(values)}
        return Workload(self.inputs, self.outputs, self.op_name, self.constants, merged)

    @property
    def tuning_dims(self) -> dict[str, int]:
        """The dims' values the tuner measures at: `dims_at`, else every dim at its upper bound."""
        return {d.name: dict(self.dims_at).get(d.name, d.upper) for d in self.dims}

    @cached_property
    def key(self) -> str:
        """Structural hash: equal for equal definitions, whatever names the user chose."""
        return key_of_canonical_text(self.canonical_text)

    def loop_extent(self, axis: IterVar) -> int:
        """An axis's loop extent: its static extent, or its run-time bound at the tuning dims (a
        bucket's loops cover its own sizes only; the storage keeps the range's upper bound)."""
        if axis.bound is None:
            return axis.extent
        return min(axis.extent, value_of(axis.bound, self.tuning_dims))

    def flops(self) -> int:
        """Floating-point operations of one run: 2 per multiply-add in reductions, 1 per element otherwise."""
        extent = self.loop_extent  # run-time extents at the values the tuner measures with (te/dims.py)
        total = 0
        for t in self.computes:
            n = 1
            for a in t.op.axes:
                n *= extent(a)
            if isinstance(t.op.body, Reduce):
                r = 1
                for a in t.op.body.axes:
                    r *= extent(a)
                total += 2 * n * r
            else:
                total += n
        return total

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}{list(t.shape)}" for t in self.outputs)
        return f"Workload({self.op_name}: {ins} -> {outs}, key={self.key})"
