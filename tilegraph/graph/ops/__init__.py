"""Graph operators: shape inference, numpy references and te lowerings (registry.OPS)."""

from tilegraph.graph.ops import dims_values, elementwise, nn, shape, winograd  # noqa: F401 (registers the ops)
from tilegraph.graph.ops.registry import OPS, OpDef, infer_types, op_def, reference_outputs

__all__ = ["OPS", "OpDef", "infer_types", "op_def", "reference_outputs"]
