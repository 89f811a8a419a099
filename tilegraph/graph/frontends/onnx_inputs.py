"""A model's inputs, as specialisation needs them: which inputs the caller feeds, which of them
a tensor is computed from, and a copy of the model with some bound to values.

    names = model_inputs(proto)                        # initializers listed as inputs excluded
    deciding = upstream_inputs(proto, ["shape"])       # the inputs a Reshape's shape comes from
    bound = bind_inputs(proto, {"axes": [1]})          # those inputs become initializers
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilegraph.errors import GraphError, shorten


def model_inputs(proto: Any) -> list[str]:
    """The graph inputs a caller feeds (initializers listed as inputs are weights, not inputs)."""
    initializers = {t.name for t in proto.graph.initializer}
    return [v.name for v in proto.graph.input if v.name not in initializers]


def upstream_inputs(proto: Any, tensors: Sequence[str]) -> tuple[str, ...]:
    """The model inputs (in model order) that `tensors` are computed from."""
    producers = {out: node for node in proto.graph.node for out in node.output if out}
    seen: set[str] = set()
    stack = list(tensors)
    while stack:
        tensor = stack.pop()
        if tensor not in seen:
            seen.add(tensor)
            if tensor in producers:
                stack.extend(i for i in producers[tensor].input if i)
    return tuple(name for name in model_inputs(proto) if name in seen)


def bind_inputs(model: Any, values: Mapping[str, Any], source: str = "model") -> Any:
    """A copy of ONNX `model` whose inputs named in `values` are initializers holding those values:
    what compiling with `values=` (or a specialisation on run-time values) reads.

        before: inputs x: float32[2, 3], axes: int64[1];  ReduceSum(x, axes)
        after:  inputs x: float32[2, 3];  initializer axes = [1];  ReduceSum(x, axes)

    A value given as an array must have the input's declared dtype; a list or number is converted
    to it (exactly, else GraphError); either must fit the declared shape (a size-1 or scalar value
    takes the declared shape of one element)."""
    from onnx import helper, numpy_helper

    from tilegraph.graph.frontends.onnx import load_model

    proto = load_model(model)
    declared = {v.name: v for v in proto.graph.input}
    names = model_inputs(proto)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise GraphError(f"{source}: values names {unknown}, which are not model inputs ({', '.join(names)})")
    arrays = {}
    for name, value in values.items():
        tensor = declared[name].type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        if isinstance(value, np.ndarray):
            if value.dtype != dtype:
                raise GraphError(f"{source}: value of input {name!r} is {value.dtype}, the model takes {dtype}")
            array = value
        else:
            array = np.asarray(value)
            converted = array.astype(dtype)
            if array.dtype.kind not in "biuf" or not np.array_equal(converted, array):
                raise GraphError(f"{source}: value of input {name!r} ({shorten(value)}) is not exactly a {dtype}")
            array = converted
        if tensor.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
            if len(dims) != array.ndim and array.size == 1 and None not in dims and int(np.prod(dims)) == 1:
                array = array.reshape(dims)
            if len(dims) != array.ndim or any(d is not None and d != a for d, a in zip(dims, array.shape)):
                shown = [d if d is not None else "?" for d in dims]
                raise GraphError(f"{source}: value of input {name!r} has shape {list(array.shape)}, "
                                 f"the model takes {shown}")
        arrays[name] = array
    bound = type(proto)()
    bound.CopyFrom(proto)
    keep = [v for v in bound.graph.input if v.name not in arrays]
    del bound.graph.input[:]
    bound.graph.input.extend(keep)
    bound.graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in arrays.items())
    return bound


__all__ = ["bind_inputs", "model_inputs", "upstream_inputs"]
