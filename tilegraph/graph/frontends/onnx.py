"""from_onnx: an ONNX model (a path or a ModelProto) as a tilegraph Graph, shape subgraphs folded.

    g = from_onnx("resnet50.onnx")                        # external data files next to it load too
    g = from_onnx(model_proto, input_shapes={"input_ids": (1, 128)})   # fixes symbolic extents

Opsets 7 to the newest the installed onnx defines are read: models older than opset 13 are first
upgraded to 13 with onnx.version_converter (refused naming the version where it cannot; opsets 1
to 6, from before broadcasting, go the same way); newer
opsets share the converters of the versions whose semantics they kept (ONNX_VERSIONS says which).

Fold first, then judge: a node whose inputs are all constants is evaluated at conversion time (by
the op's numpy reference, or by ONNX's reference evaluator for an op tilegraph does not compile),
so only operators left at run time must be supported. A model with unsupported ops left raises one
UnsupportedOpError naming all of them, their nodes and the opset. A malformed or truncated file,
missing external data or an unsupported opset raise ModelFileError with one line saying which.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.errors import GraphError, ModelFileError, RunTimeValueError, UnsupportedOpError
from tilegraph.graph.dims import check_dims
from tilegraph.graph.frontends import (  # noqa: F401 (register their converters)
    onnx_attention,
    onnx_control_ops,
    onnx_grid_ops,
    onnx_index_ops,
    onnx_loss_ops,
    onnx_math_ops,
    onnx_nn_ops,
    onnx_quant_ops,
    onnx_recurrent,
    onnx_resize,
    onnx_shape_ops,
    onnx_signal_ops,
)
from tilegraph.graph.frontends.emitter import FOLD_LIMIT_BYTES, Emitter
from tilegraph.graph.frontends.onnx_dims import Read, check_dims_independent
from tilegraph.graph.frontends.onnx_inputs import bind_inputs, model_inputs, upstream_inputs
from tilegraph.graph.frontends.onnx_ops import CONVERTERS, dtype_of
from tilegraph.graph.ir import DTYPES as GRAPH_DTYPES
from tilegraph.graph.ir import Graph, TensorType

OLDEST_OPSET = 7  # the operator table starts here; older models (opset 1..6, before broadcasting) upgrade too
NATIVE_OPSET = 13  # converters read opset 13's semantics and every later change; older models upgrade


def newest_opset() -> int:
    """The newest default-domain opset the installed onnx defines (and this frontend reads)."""
    return int(_onnx().defs.onnx_opset_version())


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ModelFileError("reading ONNX models needs the onnx package: pip install 'tilegraph[models]'") from None
    return onnx


def load_model(model: str | os.PathLike | Any) -> Any:
    """The ModelProto at `model` (with its external data), or `model` itself if it is one."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such ONNX file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends: the bytes are not a model
        raise ModelFileError(f"{path}: not a readable ONNX model (malformed or truncated): {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")) from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelFileError(f"{path}: not a readable ONNX model (it holds no graph; truncated?)")
    try:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(proto, str(path.parent))
    except Exception as e:  # OSError, or onnx's ValidationError for a missing file
        raise ModelFileError(f"{path}: external data is missing or unreadable: {str(e).splitlines()[0]}") from None
    return proto


def _opset(proto: Any) -> int:
    versions = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else NATIVE_OPSET


def _node_key(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def is_supported(node: Any) -> bool:
    """Whether tilegraph compiles `node`'s operator (its default-domain op type has a converter)."""
    return node.domain in ("", "ai.onnx") and node.op_type in CONVERTERS


def _upgraded(proto: Any, opset: int, source: str) -> Any:
    """`proto` in opset NATIVE_OPSET, by onnx.version_converter (ModelFileError where it cannot)."""
    try:
        from onnx import version_converter

        upgraded = version_converter.convert_version(proto, NATIVE_OPSET)
    except Exception as e:  # the converter's adapters raise RuntimeError/ValueError for ops they cannot move
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ModelFileError(f"{source}: opset {opset} could not be upgraded to opset {NATIVE_OPSET} by "
                             f"onnx.version_converter ({reason}); tilegraph reads opsets {NATIVE_OPSET}.."
                             f"{newest_opset()} natively") from None
    return _same_interface(proto, upgraded, source)


def _static_shape(value_info: Any) -> tuple[int, ...] | None:
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape") or not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return None
    return tuple(d.dim_value for d in tensor.shape.dim)


def _same_interface(original: Any, upgraded: Any, source: str) -> Any:
    """`upgraded` taking and giving the arrays `original` does. Some of onnx.version_converter's
    adapters reshape graph inputs and outputs (Scan 8 -> 9 drops the batch axis): a Reshape at the
    boundary restores each declared shape; a change of size is refused."""
    from onnx import helper

    before = {v.name: v for v in [*original.graph.input, *original.graph.output]}
    changed = []
    for v in [*upgraded.graph.input, *upgraded.graph.output]:
        old = before.get(v.name)
        old_shape, new_shape = (_static_shape(old) if old is not None else None), _static_shape(v)
        if old_shape is not None and new_shape is not None and old_shape != new_shape:
            if int(np.prod(old_shape)) != int(np.prod(new_shape)):
                raise ModelFileError(f"{source}: onnx.version_converter changed {v.name!r} from {list(old_shape)} to "
                                     f"{list(new_shape)}; tilegraph cannot read this model's opset")
            changed.append((v, old))
    if not changed:
        return upgraded
    inputs = {v.name for v in upgraded.graph.input}
    prefix, suffix = [], []
    for v, old in changed:
        inner = f"{v.name}__upgraded"
        for node in upgraded.graph.node:  # the converted graph reads and writes the inner name
            node.input[:] = [inner if i == v.name else i for i in node.input]
            node.output[:] = [inner if o == v.name else o for o in node.output]
        target = _static_shape(v) if v.name in inputs else _static_shape(old)  # the shape the Reshape makes
        shape = helper.make_tensor(f"{inner}_shape", 7, [len(target)], list(target))  # 7: int64
        upgraded.graph.initializer.append(shape)
        if v.name in inputs:
            prefix.append(helper.make_node("Reshape", [v.name, shape.name], [inner], name=f"{inner}_in"))
        else:
            suffix.append(helper.make_node("Reshape", [inner, shape.name], [v.name], name=f"{inner}_out"))
        v.CopyFrom(old)
    nodes = [*prefix, *upgraded.graph.node, *suffix]
    del upgraded.graph.node[:]
    upgraded.graph.node.extend(nodes)
    return upgraded


def check_opset(proto: Any, source: str = "model") -> int:
    """The model's default-domain opset; ModelFileError when it is newer than the installed onnx."""
    opset = _opset(proto)
    if opset > newest_opset():
        raise ModelFileError(f"{source}: opset {opset} is newer than the installed onnx knows ({newest_opset()}); "
                             "upgrade onnx (pip install -U onnx)")
    return opset


def check_supported(proto: Any, opset: int, source: str = "model") -> None:
    """UnsupportedOpError naming every unsupported op type (and its nodes) at once, counting every
    node (constant or not): what a model needs when nothing folds."""
    unsupported: dict[str, list[str]] = {}
    for index, node in enumerate(proto.graph.node):
        if not is_supported(node):
            unsupported.setdefault(_node_key(node), []).append(node.name or f"#{index}")
    if unsupported:
        raise UnsupportedOpError(unsupported, opset, source)


def _attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    def text(value: Any) -> Any:  # ONNX strings arrive as bytes
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, list):
            return [text(v) for v in value]
        return value

    return {a.name: text(helper.get_attribute_value(a)) for a in node.attribute}


def _check_single_definitions(proto: Any, source: str) -> None:
    """Every tensor is defined once: by an input, an initializer or one node output, and no two
    nodes share a (non-empty) name: ONNX's rules, which ONNX Runtime enforces too."""
    defined: dict[str, str] = {t.name: "an initializer" for t in proto.graph.initializer}
    for value_info in proto.graph.input:
        defined.setdefault(value_info.name, "a graph input")
    named: set[str] = set()
    for index, node in enumerate(proto.graph.node):
        if node.name in named:
            raise GraphError(f"{source}: two nodes are named {node.name!r}; ONNX node names are unique "
                             "(ONNX Runtime refuses such a file too)")
        if node.name:
            named.add(node.name)
        for out in node.output:
            if not out:
                continue
            if out in defined:
                raise GraphError(f"{source}: tensor {out!r} is defined twice (by {defined[out]} and by node "
                                 f"{node.name or index!r}); ONNX defines each tensor once")
            defined[out] = f"node {node.name or index!r}"


def _check_input_shapes(proto: Any, shapes: Mapping[str, Sequence[int]], source: str) -> None:
    initializers = {t.name for t in proto.graph.initializer}
    names = [v.name for v in proto.graph.input if v.name not in initializers]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise GraphError(f"{source}: input_shapes names {unknown}, which are not graph inputs ({', '.join(names)})")
    for name, shape in shapes.items():
        if isinstance(shape, (str, bytes)) or not all(
                isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise GraphError(f"{source}: input_shapes[{name!r}] = {shape!r}: expected non-negative integers")


def _input_type(value_info: Any, shapes: Mapping[str, Sequence[int]],
                dims: Mapping[str, tuple[int, int]] | None = None,
                axes: list[str | None] | None = None) -> TensorType:
    """The input's type; a symbolic extent named in `dims` at its upper bound (its name appended
    to `axes`, None for every static axis)."""
    tensor = value_info.type.tensor_type
    name = value_info.name
    dtype = dtype_of(tensor.elem_type, f"graph input {name!r}")
    dims = dims or {}
    if name in shapes:
        given = tuple(int(s) for s in shapes[name])
        declared = list(tensor.shape.dim)
        if tensor.HasField("shape") and (len(declared) != len(given) or any(
                d.HasField("dim_value") and d.dim_value != g for d, g in zip(declared, given))):
            shown = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in declared]
            raise GraphError(f"input_shapes[{name!r}] = {list(given)} does not fit the declared shape {shown}")
        return TensorType(given, dtype)
    extents = []
    for d in tensor.shape.dim:
        if not d.HasField("dim_value") and d.dim_param in dims:
            extents.append(dims[d.dim_param][1])
            if axes is not None:
                axes.append(d.dim_param)
            continue
        if not d.HasField("dim_value"):
            raise GraphError(f"graph input {name!r} has a symbolic extent {d.dim_param!r}; give its range with "
                             f"dims={{{d.dim_param!r}: (1, N)}} (--dim {d.dim_param}=1:N), or fix it with "
                             f"input_shapes={{{name!r}: (...)}} (--input-shape {name}=D0,D1,...)")
        extents.append(d.dim_value)
        if axes is not None:
            axes.append(None)
    return TensorType(tuple(extents), dtype)


def from_onnx(model: str | os.PathLike | Any, input_shapes: Mapping[str, Sequence[int]] | None = None,
              name: str | None = None, dims: Mapping[str, Any] | None = None) -> Graph:
    """The Graph of an ONNX model: inputs in model order, outputs in model order, weights as
    constants (no copies beyond what onnx's parser makes), constant subgraphs folded.

    `dims` ({dim_param: (lower, upper)}) keeps those symbolic extents run-time dims (graph/dims.py):
    the graph is read at every dim's upper bound, and checked to compute the same way at other
    values (check_dims_independent)."""
    proto = load_model(model)
    source = str(model) if not hasattr(model, "graph") else (proto.graph.name or "model")
    ranges = check_dims(dims or {}, source)
    opset = check_opset(proto, source)
    if opset < NATIVE_OPSET:
        proto, opset = _upgraded(proto, opset, source), NATIVE_OPSET
    _check_input_shapes(proto, input_shapes or {}, source)
    read = _read(proto, input_shapes, name, ranges, source, opset)
    if not ranges:
        return read.graph
    return check_dims_independent(read, lambda r: _read(proto, input_shapes, name, r, source, opset), source)


def _read(proto: Any, input_shapes: Any, name: str | None, ranges: dict[str, tuple[int, int]], source: str,
          opset: int) -> Read:
    from onnx import numpy_helper

    e = Emitter(name or proto.graph.name or "model")
    env: dict[str, str] = {}
    initializers = {t.name for t in proto.graph.initializer}
    for tensor in proto.graph.initializer:
        try:
            array = numpy_helper.to_array(tensor)
        except Exception as err:  # a wrong-size or malformed initializer: name it
            raise GraphError(f"{source}: initializer {tensor.name!r} is malformed: {str(err).splitlines()[0]}") from None
        env[tensor.name] = e.constant(_graph_array(array, f"{source}: initializer {tensor.name!r}"), tensor.name)
    input_dims: dict[str, tuple[str | None, ...]] = {}
    for value_info in proto.graph.input:
        if value_info.name not in initializers:
            axes: list[str | None] = []
            env[value_info.name] = e.input(value_info.name, _input_type(value_info, input_shapes or {}, ranges, axes))
            if any(axes):
                input_dims[env[value_info.name]] = tuple(axes)
    _check_single_definitions(proto, source)
    e.subgraph = lambda graph, where, ins=(): _convert_subgraph(e, graph, env, proto, opset, f"{source}: {where}", ins)
    unsupported = _convert_nodes(e, proto.graph.node, env, proto, opset, source)
    if unsupported:
        raise UnsupportedOpError(unsupported, opset, source)
    outputs = []
    for value_info in proto.graph.output:
        if value_info.name not in env:
            raise GraphError(f"{source}: graph output {value_info.name!r} is never computed")
        outputs.append(_output_named(e, env[value_info.name], value_info.name))
    graph = e.build(outputs)
    if ranges:
        unknown = sorted(set(ranges) - {d for axes in input_dims.values() for d in axes if d})
        if unknown:
            names = sorted({d.dim_param for v in proto.graph.input for d in v.type.tensor_type.shape.dim
                            if d.dim_param})
            raise GraphError(f"{source}: dims names {unknown}, which no graph input has as a symbolic extent "
                             f"(its inputs' dim_params: {', '.join(names) or 'none'})")
        graph = graph.replace(dims=ranges, input_dims=input_dims)
    return Read(graph.verify(), e.constants, e.recipes)


def _convert_nodes(e: Emitter, nodes: Any, env: dict[str, str], proto: Any, opset: int,
                   source: str) -> dict[str, list[str]]:
    """Convert `nodes` in order into `e`, recording each output's graph name in `env`; the
    unsupported operators left (after folding), by op type."""
    unsupported: dict[str, list[str]] = {}
    blocked: set[str] = set()  # outputs of unsupported nodes: their readers cannot be converted
    for index, node in enumerate(nodes):
        where = f"node {node.name or index!r} ({node.op_type})"
        if any(i and i in blocked for i in node.input):
            blocked.update(o for o in node.output if o)
            if not is_supported(node):
                unsupported.setdefault(_node_key(node), []).append(node.name or f"#{index}")
            continue
        missing = [i for i in node.input if i and i not in env]
        if missing:
            raise GraphError(f"{source}: {where} reads undefined tensors {missing} "
                             "(not computed by an earlier node: dangling, a cycle, or nodes out of order)")
        ins = [env[i] if i else "" for i in node.input]
        if not is_supported(node):
            folded = _fold_unsupported(e, node, ins, proto, where)
            try:
                if folded is None and _expanded(e, node, ins, env, proto, opset, source, index):
                    continue  # defined by its function body, converted in its place
            except RunTimeValueError as err:  # inside the body: the node's own inputs decide
                raise RunTimeValueError(f"{where}: {err}", err.tensor, err.inputs or upstream_inputs(
                    proto, [i for i in node.input if i])) from None
            if folded is None:
                unsupported.setdefault(_node_key(node), []).append(node.name or f"#{index}")
                blocked.update(o for o in node.output if o)
                continue
            outs = folded
        else:
            try:
                outs = _convert_node(e, node, ins, opset)
            except RunTimeValueError as err:
                onnx_names = [o for o, g in env.items() if g == err.tensor] or [i for i in node.input if i]
                raise RunTimeValueError(str(err) if where in str(err) else f"{where}: {err}", err.tensor,
                                        upstream_inputs(proto, onnx_names)) from None
            except UnsupportedOpError:  # from a subgraph: names its operators already
                raise
            except GraphError as err:
                raise type(err)(str(err) if where in str(err) else f"{where}: {err}") from None
        for onnx_name, graph_name in zip(node.output, outs):
            if onnx_name:
                env[onnx_name] = graph_name
    return unsupported


# operators that only move, pick or reinterpret values (or read shapes): bfloat16 goes through them as it is
_EXACT_ON_BFLOAT16 = frozenset({
    "Cast", "CastLike", "BitCast", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Slice", "Gather",
    "GatherElements", "GatherND", "Expand", "Identity", "Split", "Tile", "Shape", "Size", "Where", "If", "Loop", "Scan",
    "Constant", "ConstantOfShape", "Dropout"})


def _convert_node(e: Emitter, node: Any, ins: list[str], opset: int) -> list[str]:
    """CONVERTERS[node.op_type] applied to `node`. An operator computing on bfloat16 computes in
    float32 and rounds its results to bfloat16 once (as ONNX's reference rounds per operator), not
    after every graph op its converter writes."""
    narrow = node.op_type not in _EXACT_ON_BFLOAT16 and any(i and e.type_of(i).dtype == "bfloat16" for i in ins)
    if not narrow:
        return CONVERTERS[node.op_type](e, node, ins, _attributes(node), opset)
    ins = [e.emit("cast", [i], {"to": "float32"}, f"{node.name}_in{k}_float")
           if i and e.type_of(i).dtype == "bfloat16" else i for k, i in enumerate(ins)]
    wide = type(node)()
    wide.CopyFrom(node)
    wide.output[:] = [f"{o}_float" if o else "" for o in node.output]  # the bfloat16 results keep the names
    outs = CONVERTERS[node.op_type](e, wide, ins, _attributes(node), opset)
    return [e.emit("cast", [o], {"to": "bfloat16"}, f"{node.name}_out{k}_bf16", [name] if name else None)
            if o and e.type_of(o).dtype == "float32" else o
            for k, (o, name) in enumerate(zip(outs, [*node.output, *[""] * len(outs)]))]


def _expanded(e: Emitter, node: Any, ins: list[str], env: dict[str, str], proto: Any, opset: int, source: str,
              index: int) -> bool:
    """Whether `node` converted as its ONNX function body (every operator in the body supported)."""
    from tilegraph.graph.frontends.onnx_functions import expand_function

    found = expand_function(node, opset, [e.type_of(i) if i else None for i in ins],
                            f"{node.name or node.op_type}_{index}_fn_")
    if found is None:
        return False
    nodes, body_opset = found
    if not all(is_supported(n) for n in nodes):
        return False
    return not _convert_nodes(e, nodes, env, proto, body_opset, f"{source}: {node.op_type} as its function")


def _convert_subgraph(e: Emitter, graph: Any, outer: dict[str, str], proto: Any, opset: int, source: str,
                      inputs: Sequence[str] = ()) -> list[str]:
    """The graph tensors of a subgraph's outputs (an If branch, a Loop or Scan body), its nodes
    converted into `e` reading the enclosing scope's tensors by name and its formal inputs bound to
    `inputs` (graph tensors, in order)."""
    from onnx import numpy_helper

    env = dict(outer)
    if len(inputs) != len(graph.input):
        raise GraphError(f"{source}: the subgraph takes {len(graph.input)} inputs, {len(inputs)} given")
    env.update((formal.name, actual) for formal, actual in zip(graph.input, inputs))
    for tensor in graph.initializer:
        env[tensor.name] = e.constant(_graph_array(numpy_helper.to_array(tensor), f"{source}: {tensor.name!r}"),
                                      tensor.name)
    enclosing = e.subgraph  # a subgraph nested in this one reads this scope
    e.subgraph = lambda inner, where, ins=(): _convert_subgraph(e, inner, env, proto, opset, f"{source}: {where}", ins)
    try:
        unsupported = _convert_nodes(e, graph.node, env, proto, opset, source)
    finally:
        e.subgraph = enclosing
    if unsupported:
        raise UnsupportedOpError(unsupported, opset, source)
    missing = [o.name for o in graph.output if o.name not in env]
    if missing:
        raise GraphError(f"{source}: subgraph outputs {missing} are never computed")
    return [env[o.name] for o in graph.output]


def _graph_array(array: np.ndarray, where: str) -> np.ndarray:
    """A constant's value in a dtype graphs hold; GraphError naming it otherwise."""
    if array.dtype.name not in GRAPH_DTYPES:
        raise GraphError(f"{where} has dtype {array.dtype} (not supported)")
    return array


def _fold_unsupported(e: Emitter, node: Any, ins: list[str], proto: Any, where: str) -> list[str] | None:
    """The outputs of `node` (an operator tilegraph does not compile) as constants, evaluated by
    ONNX's reference evaluator, when every input is a constant; None otherwise."""
    if not all(not i or i in e.constants for i in ins) or any(
            a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute) or not node.output:
        return None
    from onnx.reference import ReferenceEvaluator

    opsets = {o.domain: o.version for o in proto.opset_import}
    try:
        feeds = {name: e.constants[i] for name, i in zip(node.input, ins) if name}
        evaluator = ReferenceEvaluator(node, opsets=opsets) if opsets else ReferenceEvaluator(node)
        values = evaluator.run(None, feeds)
    except Exception:  # the reference has no kernel for it, or refuses the inputs: not foldable
        return None
    outs = []
    for onnx_name, value in zip(node.output, values):
        array = np.asarray(value)
        if not onnx_name or array.dtype.name not in GRAPH_DTYPES or array.nbytes > FOLD_LIMIT_BYTES:
            return None
        outs.append(e.constant(array, onnx_name))
    return outs


def _output_named(e: Emitter, tensor: str, wanted: str) -> str:
    """Graph outputs keep the model's names (users index results by them)."""
    if tensor == wanted:
        return tensor
    return e.add("identity", [tensor], name=f"{wanted}_output", outputs=[wanted])


__all__ = ["from_onnx", "load_model", "bind_inputs", "model_inputs", "upstream_inputs", "check_supported",
           "check_opset", "is_supported", "newest_opset", "OLDEST_OPSET", "NATIVE_OPSET"]
