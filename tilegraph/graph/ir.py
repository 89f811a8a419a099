"""The graph IR: tensors with static shapes, nodes in topological order, constants as numpy arrays.

    g = Graph(name, inputs=("x",), outputs=("y",), nodes=(Node("relu", ("x",), ("y",), name="r0"),),
              values={"x": TensorType((1, 8), "float32"), "y": TensorType((1, 8), "float32")})
    print(g)                    # one line per node: its outputs' types, its op, inputs and attributes
    g.verify()                  # every tensor defined once before use, types match op inference
    g.structural_hash()         # equal for graphs that compute the same thing under other names

A Graph is immutable: passes return new graphs (`replace`, or a GraphBuilder). Constants are
read-only numpy arrays, shared between a graph and the graphs made from it (never copied).
Attribute values are hashable: ints, floats, strings, tuples of them.

Run-time dims (graph/dims.py): `dims` names each symbolic extent's range, `input_dims` says which
axes of which inputs it is. Every shape is then the largest one (each dim at its upper bound, how
tensors are stored) and `graph.extents` gives, per tensor, the extent of each axis as the te ops
compute it (a te Dim expression where it varies): a pass works on the largest shapes unaware.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from tilegraph.errors import GraphError

DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16",
          "uint8", "bool")


@functools.lru_cache(maxsize=1)
def numpy_knows_bfloat16() -> bool:
    """Whether numpy resolves the dtype name 'bfloat16', loading ml_dtypes (onnx depends on it) the
    first time. Loaded here, on the first bfloat16 TensorType, not when tilegraph is imported: the
    import costs ~1.3 s, paid by every process (workers included) that never sees a bfloat16 tensor.
    Every bfloat16 array of a graph has a TensorType made first, so numpy knows the name by then;
    kernels never see it (passes.bfloat16_through_float computes in float32 over uint16 bits)."""
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:  # without it no graph holds bfloat16: no frontend can make one
        return False
    return True


FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def is_float(dtype: str) -> bool:
    """Whether graph dtype `dtype` is a floating-point type (bfloat16 included)."""
    return dtype in FLOAT_DTYPES


@dataclass(frozen=True)
class TensorType:
    """A static shape and a numpy dtype name (one of DTYPES)."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise GraphError(f"dtype {self.dtype!r} is not supported (supported: {', '.join(DTYPES)})")
        if self.dtype == "bfloat16" and not numpy_knows_bfloat16():
            raise GraphError("bfloat16 tensors need the ml_dtypes package (pip install ml_dtypes)")
        if any(not isinstance(s, (int, np.integer)) or s < 0 for s in self.shape):
            raise GraphError(f"shape {self.shape} must be non-negative ints (dynamic extents are not supported)")
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


def freeze_attrs(attrs: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> tuple[tuple[str, Any], ...]:
    """Attributes as a sorted tuple of (name, value) with lists turned into tuples (hashable)."""
    items = attrs.items() if isinstance(attrs, Mapping) else attrs

    def frozen(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(frozen(x) for x in v)
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.floating):
            return float(v)
        return v

    return tuple(sorted((str(k), frozen(v)) for k, v in items))


@dataclass(frozen=True)
class Node:
    """One operator application: `outputs = op(*inputs, **attrs)`; tensors are named by strings."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", freeze_attrs(self.attrs))

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)


def readonly(array: np.ndarray) -> np.ndarray:
    """`array` as a read-only view (no copy); C-contiguous, as kernels need (copied only if not)."""
    array = np.asarray(array)
    view = (array if array.flags.c_contiguous else array.copy(order="C")).view()  # keeps 0-d arrays 0-d
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class Graph:
    """A model: named inputs, outputs, nodes in topological order, the type of every tensor and
    the constants (weights, folded shapes) by name."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    values: Mapping[str, TensorType]
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    dims: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # name -> (lower, upper)
    input_dims: Mapping[str, tuple[str | None, ...]] = field(default_factory=dict)  # input -> dim per axis

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        consts = {k: (v if not v.flags.writeable and v.flags.c_contiguous else readonly(v))
                  for k, v in self.constants.items()}
        object.__setattr__(self, "constants", MappingProxyType(consts))
        object.__setattr__(self, "dims", MappingProxyType({k: (int(lo), int(hi)) for k, (lo, hi) in self.dims.items()}))
        object.__setattr__(self, "input_dims", MappingProxyType({k: tuple(v) for k, v in self.input_dims.items()}))

    @functools.cached_property
    def extents(self) -> Mapping[str, tuple[Any, ...]]:
        """The te extents of every tensor that has a run-time dim (graph/dims.py); {} without dims."""
        if not self.dims:
            return MappingProxyType({})
        from tilegraph.graph.dims import propagate_extents

        return MappingProxyType(propagate_extents(self))

    # ---- queries ---------------------------------------------------------------------------
    def type_of(self, tensor: str) -> TensorType:
        try:
            return self.values[tensor]
        except KeyError:
            raise GraphError(f"graph {self.name!r} has no tensor named {tensor!r}") from None

    def producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in dict.fromkeys(node.inputs):
                if name:
                    users.setdefault(name, []).append(node)
        return users

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return counts

    def replace(self, **changes: Any) -> Graph:
        return replace(self, **changes)

    # ---- checks ----------------------------------------------------------------------------
    def verify(self, infer: bool = True) -> Graph:
        """Raise GraphError unless every tensor is defined exactly once before its use, node names
        are unique, inputs, outputs and constants have types, and (with `infer`) each node's
        declared output types are what its op infers. Returns the graph, so `g = g.verify()` chains."""
        from tilegraph.graph.ops.registry import infer_types  # the op table sits beside the IR

        defined: set[str] = set()
        for name in (*self.inputs, *self.constants):
            if name in defined:
                raise GraphError(f"tensor {name!r} is defined twice (graph input or constant)")
            defined.add(name)
            self.type_of(name)
        for name, array in self.constants.items():
            expected = self.values[name]
            if tuple(array.shape) != expected.shape or str(array.dtype) != expected.dtype:
                raise GraphError(f"constant {name!r} holds {array.dtype}{list(array.shape)}, its type says {expected}")
        seen_nodes: set[str] = set()
        for node in self.nodes:
            if node.name in seen_nodes:
                raise GraphError(f"two nodes are named {node.name!r}; node names must be unique")
            seen_nodes.add(node.name)
            for name in node.inputs:
                if name and name not in defined:
                    raise GraphError(f"node {node.name!r} ({node.op}) reads {name!r} before it is defined "
                                     "(a dangling tensor or nodes out of topological order)")
            for name in node.outputs:
                if name in defined:
                    raise GraphError(f"node {node.name!r} ({node.op}) redefines tensor {name!r}")
                defined.add(name)
            if infer:
                inferred = infer_types(node, [self.type_of(i) if i else None for i in node.inputs])
                declared = [self.type_of(o) for o in node.outputs]
                if inferred != declared:
                    raise GraphError(f"node {node.name!r} ({node.op}) declares outputs "
                                     f"{', '.join(map(str, declared))} but its op infers {', '.join(map(str, inferred))}")
        for name in self.outputs:
            if name not in defined:
                raise GraphError(f"graph output {name!r} is never defined")
        if self.dims or self.input_dims:
            from tilegraph.graph.dims import check_input_dims

            check_input_dims(self)
        return self

    # ---- printing and hashing -----------------------------------------------------------
    def __str__(self) -> str:
        def typed(name: str) -> str:  # a run-time dim shown by name and range: float32[1, seq<=512]
            t, axes = self.values[name], self.input_dims.get(name, ())
            if not any(axes):
                return str(t)
            shown = [str(s) if d is None else f"{d}<={s}" for s, d in zip(t.shape, axes)]
            return f"{t.dtype}[{', '.join(shown)}]"

        lines = [f"graph {self.name}(" + ", ".join(f"{n}: {typed(n)}" for n in self.inputs) + ") {"]
        big = [n for n in self.constants if self.values[n].size > 1]
        if big:
            total = sum(self.values[n].nbytes for n in self.constants)
            lines.append(f"  # {len(self.constants)} constants, {total / 1e6:.2f} MB")
        for node in self.nodes:
            outs = ", ".join(f"{o}: {self.values[o]}" for o in node.outputs)
            args = ", ".join(_describe_input(self, i) for i in node.inputs)
            attrs = "".join(f", {k}={_short(v)}" for k, v in node.attrs)
            lines.append(f"  {outs} = {node.op}({args}{attrs})" + (f"  # {node.name}" if node.name else ""))
        lines.append("  return " + ", ".join(self.outputs))
        lines.append("}")
        return "\n".join(lines)

    def structural_hash(self) -> str:
        """sha256 of the graph with tensors numbered by first appearance, so renaming tensors or
        nodes leaves it unchanged; constants enter by their bytes."""
        number: dict[str, int] = {}

        def ref(name: str) -> str:
            if not name:
                return "-"
            if name not in number:
                number[name] = len(number)
            return f"%{number[name]}"

        h = hashlib.sha256()
        for name in self.inputs:
            h.update(f"in {ref(name)} {self.values[name]}\n".encode())
        for node in self.nodes:
            for name in node.inputs:
                if name in self.constants and name not in number:
                    array = self.constants[name]
                    h.update(f"const {ref(name)} {self.values[name]} ".encode())
                    h.update(hashlib.sha256(array.tobytes()).digest())
            h.update(f"{node.op} {[ref(i) for i in node.inputs]} -> {[ref(o) for o in node.outputs]} "
                     f"{node.attrs!r}\n".encode())
        h.update(f"out {[ref(o) for o in self.outputs]}".encode())
        return h.hexdigest()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe_input(graph: Graph, name: str) -> str:
    if not name:
        return "_"
    if name in graph.constants:
        array = graph.constants[name]
        if array.size == 1:
            return f"{array.reshape(-1)[0]!r}"
        return f"{name}:const"
    return name


__all__ = ["DTYPES", "TensorType", "Node", "Graph", "freeze_attrs", "readonly"]
