"""fused_spec: one group of nodes as a fused kernel: its te definition (the composition of its
nodes' lowerings, which defines what the kernel computes and keys it) and how to build it from
the anchor's own schedule.

    spec = fused_spec(graph, group)
    spec.workload            # inputs fx0.. (the group's tensors), output fy: the fused computation
    spec.anchor              # KernelSpec of the anchor alone (its key finds its tuning records)
    kernel = spec.build(target, db)

Building (Hidet's post-scheduling fusion): the anchor's schedule (its fastest database record
that fuses, else its default schedule) is replayed unchanged on the anchor's workload;
`write_once` then makes it store its output once if it accumulated there; each anchor input produced inside the group is
replaced by its producers' expression (`inline_prologue`), and the output store by the epilogue
chain's value at the mapped index (`fuse_epilogue`). One tuning of the anchor serves every fused
variant. A group without an anchor (an injective chain) is its te composition, default-scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tilegraph.errors import ScheduleError, TilegraphError
from tilegraph.graph.dims import argument_dims
from tilegraph.graph.fusion.partition import Group
from tilegraph.graph.ir import Graph
from tilegraph.graph.kernels import (
    KernelSpec,
    best_schedule,
    best_schedules,
    kernel_spec,
    lower_node,
    with_dims_argument,
)
from tilegraph.graph.ops.registry import op_def, te_shape
from tilegraph.loop.edit import replace_buffer
from tilegraph.loop.from_te import DIM_EXTENTS_ATTR, param_dim_extents
from tilegraph.loop.ir import Buffer, Func
from tilegraph.runtime.backends import backend_for
from tilegraph.schedule.fusion.epilogue import fuse_epilogue
from tilegraph.schedule.fusion.inline import tensor_value
from tilegraph.schedule.fusion.prologue import inline_prologue, with_params
from tilegraph.schedule.fusion.write_once import write_once
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.clone import with_unique_names
from tilegraph.te.expr import BufferLoad, Expr, Var, const
from tilegraph.te.simplify import simplify
from tilegraph.te.tensor import Tensor
from tilegraph.te.visit import substitute
from tilegraph.te.workload import Workload

if TYPE_CHECKING:
    from tilegraph.tune.database import Database

Index = tuple[Expr, ...]
FUSE_TRIES = 8  # the anchor's fastest records tried for a fused kernel before its default schedule


@dataclass(frozen=True)
class FusedSpec:
    group: Group
    workload: Workload  # the fused computation: inputs = `arguments`, output = the group's output
    arguments: tuple[str, ...]
    anchor: KernelSpec | None
    env: dict[str, Any] = field(repr=False)  # graph tensor -> te tensor (or scalar) of the composition
    placeholders: dict[str, Tensor] = field(repr=False)
    output_index: Callable[[Index], Index] = field(repr=False)

    @property
    def key(self) -> str:
        return self.workload.key

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.group.nodes

    @property
    def outputs(self) -> tuple[str, ...]:
        return (self.group.output,)

    @property
    def label(self) -> str:
        return self.group.anchor or self.group.nodes[-1]

    def at(self, values: Mapping[str, int]) -> FusedSpec:
        """This fused kernel in the bucket of its run-time dims at `values` (graph/buckets.py): the
        anchor's bucket's records build it."""
        anchor = None if self.anchor is None else self.anchor.at(values)
        return replace(self, workload=self.workload.at(values), anchor=anchor)

    def lookup(self, db: Database | None, target: Target) -> Any:
        """The anchor's recorded schedules, fastest first (up to FUSE_TRIES), or None; a chain: the
        fused workload's best schedule, or None."""
        if self.anchor is None:
            return best_schedule(db, self.workload, target)
        return best_schedules(db, self.anchor.workload, target, FUSE_TRIES) or None

    def build(self, target: Target, schedule: Any = None) -> tuple[Any, bool]:
        """(kernel, tuned): the fused kernel from the first of the anchor's recorded schedules (a
        Schedule or a sequence of them, fastest first, from `lookup`) that fuses, else from the
        anchor's default schedule; TilegraphError (the first record's) when none fuses.

        A record can fail to fuse where another does: a GPU thread tile of strided virtual-thread
        chunks has no dense region to write back once, so no epilogue can follow it. A fused kernel
        of a slower record beats the record's kernel followed by separate epilogue kernels, each a
        pass over the output in memory (measured: BERT on an H200 ran 18% slower so)."""
        backend = backend_for(target)
        if self.anchor is None:
            sch = schedule if schedule is not None else backend.default_schedule(self.workload, target)
            return backend.build(sch, target), schedule is not None
        recorded = [] if schedule is None else list(schedule) if isinstance(schedule, (list, tuple)) else [schedule]
        first_error: TilegraphError | None = None
        for sch in recorded:
            try:
                return backend.build(Schedule(self.workload, func=self._fuse(sch.copy(), target)), target), True
            except TilegraphError as e:
                first_error = first_error or e
        try:
            sch = backend.default_schedule(self.anchor.workload, target)
            return backend.build(Schedule(self.workload, func=self._fuse(sch, target)), target), False
        except TilegraphError as e:
            raise first_error or e from None

    def _fuse(self, sch: Schedule, target: Target | None = None) -> Func:
        assert self.anchor is not None
        anchor_node = self.anchor.node
        n_in = len(self.anchor.workload.inputs)
        out_param = sch.func.params[n_in].name
        if self.group.output != anchor_node.outputs[0]:
            write_once(sch, out_param)
        buffers = {id(t): Buffer(t.name, t.shape, t.dtype) for t in self.placeholders.values()}
        if target is not None:
            self._materialize_tile_operands(sch, target, buffers)
        func = sch.func
        if self.workload.dims != self.anchor.workload.dims:  # the anchor reads its own dims input's order
            raise ScheduleError(f"fused kernel of {', '.join(self.group.nodes)}: its run-time dims "
                                f"{[d.name for d in self.workload.dims]} are not its anchor's")
        for param, tensor_name in zip(func.params[:n_in], self.anchor.arguments):
            if argument_dims(tensor_name) is not None:
                continue  # the dims input: the fused kernel's own, the same buffer name
            source = self.env[tensor_name]

            def value(idx: Index, source: Tensor = source) -> Expr:
                return tensor_value(source, idx, buffers)

            func = inline_prologue(func, param.name, value)
        fused_out = self.workload.outputs[0]
        out_buffer = Buffer(fused_out.name, fused_out.shape, fused_out.dtype)
        anchor_out = self.env[anchor_node.outputs[0]]
        final = self.env[self.group.output]

        def epilogue(v: Expr, idx: Index) -> Expr:
            return tensor_value(final, self.output_index(idx), buffers, replace={id(anchor_out): lambda _: v})

        if self.group.output == anchor_node.outputs[0]:  # a prologue only: the output is just renamed
            body = replace_buffer(func.body, out_param, out_buffer)
            func = Func(func.name, tuple(out_buffer if p.name == out_param else p for p in func.params), body,
                        func.allocs, func.attrs)
        else:
            func = fuse_epilogue(func, out_param, out_buffer, self.output_index, epilogue)
        inputs = [buffers[id(self.placeholders[name])] for name in self.arguments if argument_dims(name) is None]
        if self.workload.dims_input is not None:
            t = self.workload.dims_input
            inputs.append(Buffer(t.name, t.shape, t.dtype))
            # the fused kernel's parameters' run-time extents (the anchor's name its own tensors):
            # a store into the fused output past them is one lowering may skip (skip_past_dims)
            attrs = dict(func.attrs)
            attrs[DIM_EXTENTS_ATTR] = (*attrs.get(DIM_EXTENTS_ATTR, ()), *param_dim_extents(self.workload))
            func = replace(func, attrs=tuple(attrs.items()))
        return with_params(func, inputs, [out_buffer])

    def _materialize_tile_operands(self, sch: Schedule, target: Target, buffers: dict[int, Buffer]) -> None:
        """Where the anchor's schedule computes its register tile on the matrix unit (AMX tiles
        load rows of memory), an operand the tile product reads in place whose prologue is more
        than a load (attention's Q: a slice, transpose and cast of the projection) is first copied
        per parallel task (cache_read at the task's loop), so the prologue is computed into the copy
        and the tile product reads it; inlined into the anchor's loads, it would leave no nest
        lowering can take (use_matrix_tiles), and the tile-sized register tile would run on vectors."""
        from tilegraph.lower.passes.use_matrix_tiles import makes_tile_products
        from tilegraph.schedule.primitives.common import get_block, get_loop
        from tilegraph.schedule.primitives.nest import block_reads
        from tilegraph.tune.gensor.state import anchor_tensor

        assert self.anchor is not None
        n_in = len(self.anchor.workload.inputs)
        anchor = anchor_tensor(self.anchor.workload).name
        worked = [param.name for param, name in zip(sch.func.params[:n_in], self.anchor.arguments)
                  if argument_dims(name) is None and not _plain_read(self.env[name], param.shape, buffers)]
        if not worked or anchor not in sch.block_names():
            return
        direct = [name for name in worked if block_reads(get_block(sch.func, anchor), name)]
        if not direct or not makes_tile_products(sch.func, target):
            return
        loops = sch.loops(anchor)
        task = next((name for name in loops if get_loop(sch.func, name).kind == "parallel"), None)
        for name in direct:
            copy = sch.cache_read(anchor, name, "global")
            if task is not None:
                sch.compute_at(copy, task)
            inner = sch.loops(copy)[-1]
            if get_loop(sch.func, inner).extent % VECTOR_COPY == 0:
                sch.vectorize(sch.split(inner, [None, VECTOR_COPY])[1])


VECTOR_COPY = 16  # lanes of a materialized operand's copy


def _plain_read(source: Tensor, shape: tuple[int, ...], buffers: dict[int, Buffer]) -> bool:
    """Whether the anchor's operand is its tensor as it is (a load at the same index)."""
    idx = tuple(Var(f"i{d}", const(0).dtype) for d in range(len(shape)))
    try:
        value = tensor_value(source, idx, buffers)
    except (ValueError, TilegraphError):
        return False
    return isinstance(value, BufferLoad) and value.indices == idx


def fused_spec(graph: Graph, group: Group) -> FusedSpec:
    """The te composition of `group` and, for an anchored group, the anchor's own spec."""
    nodes = {n.name: n for n in graph.nodes}
    env: dict[str, Any] = {}
    placeholders: dict[str, Tensor] = {}
    for name in group.nodes:
        node = nodes[name]
        outs = lower_node(graph, node, env, prefix="fx", placeholders=placeholders)
        env.update(zip(node.outputs, outs))
    final = env[group.output]
    (renamed,) = with_unique_names([final], names={id(final): "fy"})
    workload = Workload([placeholders[n] for n in placeholders], [renamed], name="fused_" + nodes[group.nodes[-1]].op)
    arguments = with_dims_argument(tuple(placeholders), workload)
    anchor = kernel_spec(graph, nodes[group.anchor]) if group.anchor is not None else None
    index = _output_index(graph, group, nodes)
    return FusedSpec(group, workload, arguments, anchor, env, placeholders, index)


def _output_index(graph: Graph, group: Group, nodes: dict) -> Callable[[Index], Index]:
    """The map from an index of the anchor's output to the group output's (see partition)."""
    steps: list[Callable[[Index], Index]] = []
    for name in group.epilogue_path:
        node = nodes[name]
        out_shape = te_shape(graph.type_of(node.outputs[0]).shape)
        data = next(t for t in node.inputs if t)
        in_shape = te_shape(graph.type_of(data).shape)
        if node.op == "transpose":
            perm = tuple(node.attr("perm"))
            steps.append(lambda idx, perm=perm: tuple(idx[p] for p in perm))
        elif op_def(node.op).view:
            steps.append(lambda idx, a=in_shape, b=out_shape: _reshape_index(idx, a, b))
        else:  # elementwise with leading 1s added
            lead = len(out_shape) - len(in_shape)
            steps.append(lambda idx, lead=lead: (*(const(0, "int32"),) * lead, *idx))

    # The map is built once on fresh variables over the anchor's output extents and simplified
    # after every step with their ranges: a chain of reshapes re-linearises the index each time,
    # and unsimplified `flat // e`, `flat % e` terms would nest exponentially (a Swin window
    # reverse, view-view-permute-view-view, once hung compilation).
    anchor = nodes[group.anchor] if group.anchor is not None else None
    extents = te_shape(graph.type_of(anchor.outputs[0]).shape) if anchor is not None else ()
    fresh = tuple(Var(f"tg_anchor_i{d}") for d in range(len(extents)))
    ranges = {v: max(1, int(e)) for v, e in zip(fresh, extents)}
    mapped: Index = fresh
    for step in steps:
        mapped = tuple(simplify(i, ranges) for i in step(mapped))

    def index(idx: Index) -> Index:
        if len(idx) != len(fresh):  # not an index of the anchor's output: compose step by step
            for step in steps:
                idx = step(idx)
            return tuple(simplify(i) for i in idx)
        binding = dict(zip(fresh, idx))
        return tuple(simplify(substitute(i, binding)) for i in mapped)

    return index


def _reshape_index(idx: Index, in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Index:
    flat: Expr = const(0, "int32")
    for i, extent in zip(idx, in_shape):
        flat = flat * extent + i
    out: list[Expr] = []
    for extent in reversed(out_shape):
        out.append(flat % extent)
        flat = flat // extent
    return tuple(reversed(out))


def group_spec(graph: Graph, group: Group) -> Any:
    """The spec building `group`: one node's KernelSpec, else its FusedSpec."""
    if not group.fused:
        return kernel_spec(graph, next(n for n in graph.nodes if n.name == group.nodes[0]))
    return fused_spec(graph, group)


__all__ = ["FusedSpec", "fused_spec", "group_spec"]
