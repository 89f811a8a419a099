"""ONNX operators defined as functions of other operators, expanded where tilegraph has no
converter of its own: the schema's function body (or its context-dependent body, generated for
the node's attributes and input types) replaces the node, its tensors renamed apart.

    before:  y = RotaryEmbedding(x, cos, sin, position_ids)
    after:   the body's Slice/Gather/Mul/Concat nodes, reading x ... and writing y

This is how the ONNX spec defines them (the `_expanded` backend cases are these bodies), so an
operator newer than this frontend's converters compiles as soon as the ops its body uses do.
"""

from __future__ import annotations

from typing import Any

from tilegraph.graph.frontends.onnx_ops import ONNX_DTYPES
from tilegraph.graph.ir import TensorType

_ONNX_CODES = {dtype: code for code, dtype in ONNX_DTYPES.items()}


def _type_proto(t: TensorType | None) -> Any:
    from onnx import TypeProto, helper

    if t is None or t.dtype not in _ONNX_CODES:
        return TypeProto()
    return helper.make_tensor_type_proto(_ONNX_CODES[t.dtype], list(t.shape))


def expand_function(node: Any, opset: int, input_types: list[TensorType | None],
                    prefix: str) -> tuple[list[Any], int] | None:
    """(the nodes of `node`'s function body, renamed apart with `prefix`; the default-domain opset
    the body is written in), or None when its operator is no function."""
    import onnx
    from onnx import FunctionProto

    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # no schema at this version: not an operator the installed onnx defines
        return None
    plain = list(schema.function_opset_versions)
    contextual = list(schema.context_dependent_function_opset_versions)
    if not plain and not contextual:
        return None
    full = onnx.NodeProto()
    full.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, attribute in schema.attributes.items():
        if name not in given and attribute.default_value.name:
            full.attribute.append(attribute.default_value)
    body = FunctionProto()
    fitting = [v for v in plain + contextual if v <= opset] or [min(plain + contextual)]
    version = max(fitting)
    if version in plain:
        body.ParseFromString(schema.get_function_with_opset_version(version))
    else:
        body.ParseFromString(schema.get_context_dependent_function_with_opset_version(
            version, full.SerializeToString(), [_type_proto(t).SerializeToString() for t in input_types]))
    names = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(body.input)}
    names.update((formal, node.output[i]) for i, formal in enumerate(body.output)
                 if i < len(node.output) and node.output[i])
    attributes = {a.name: a for a in full.attribute}

    def rename(name: str) -> str:
        return names.get(name, prefix + name) if name else ""

    expanded = []
    for inner in body.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.input[:] = [rename(i) for i in inner.input]
        copy.output[:] = [rename(o) for o in inner.output]
        copy.name = prefix + (inner.name or f"{len(expanded)}")
        del copy.attribute[:]
        for a in inner.attribute:
            if a.ref_attr_name:  # an attribute of the function: the node's value, or the op's default
                if a.ref_attr_name in attributes:
                    value = onnx.AttributeProto()
                    value.CopyFrom(attributes[a.ref_attr_name])
                    value.name = a.name
                    copy.attribute.append(value)
            elif a.type == a.GRAPH:  # a loop body: its own names stay, the function's are renamed
                value = onnx.AttributeProto()
                value.CopyFrom(a)
                _rename_free_names(value.g, rename)
                copy.attribute.append(value)
            elif a.type == a.GRAPHS:
                return None
            else:
                copy.attribute.append(a)
        expanded.append(copy)
    versions = {o.domain: o.version for o in body.opset_import}
    return expanded, int(versions.get("", versions.get("ai.onnx", opset)))


def _rename_free_names(graph: Any, rename: Any) -> None:
    """Rename (in place) the names `graph`'s nodes read from enclosing scopes; names it defines
    (its inputs, initializers and node outputs, and those of nested graphs) stay."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    local |= {o for n in graph.node for o in n.output}

    def inner(name: str) -> str:
        return name if not name or name in local else rename(name)

    for n in graph.node:
        n.input[:] = [inner(i) for i in n.input]
        for a in n.attribute:
            if a.type == a.GRAPH:
                _rename_free_names(a.g, inner)
            for g in a.graphs:
                _rename_free_names(g, inner)
    for o in graph.output:  # an output may be an enclosing tensor passed through
        o.name = inner(o.name)
