"""Index checks: a gather's indices checked against the extent they index, as ONNX Runtime and
PyTorch do, so an out-of-range token id is an error naming the tensor and the value, never a
wrong row.

    checks = index_checks(graph)            # one per gather / gather_elements node
    check_indices(ids, 30522, "input 'input_ids' (node 'embed')")   # IndexOutOfRange or nothing

A compiled model checks indices held in constants when it is built, graph inputs before any
kernel runs, and indices computed inside the model right after the kernel that writes them
(fusion never folds a gather's indices into another kernel, so they always reach memory). The
kernels themselves still clamp an index to the tensor, so that no path reads outside it.

Valid values are those ONNX allows: [-extent, extent), negative ones counting from the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.ir import Graph

GATHERS = frozenset({"gather", "gather_elements"})


class IndexOutOfRange(GraphError):
    """An index outside [-extent, extent) reached a gather."""


@dataclass(frozen=True)
class IndexCheck:
    tensor: str  # the indices tensor
    extent: int  # the extent of the axis it indexes
    node: str  # the gather reading it

    def check(self, values: np.ndarray, what: str) -> None:
        check_indices(values, self.extent, f"{what} {self.tensor!r} (indices of node {self.node!r})")


def check_indices(values: np.ndarray, extent: int, where: str) -> None:
    """IndexOutOfRange naming `where` and the first bad value, unless every value is in range."""
    values = np.asarray(values)
    if values.size == 0:
        return
    low, high = values.min(), values.max()
    if low >= -extent and high < extent:
        return
    bad = values[(values < -extent) | (values >= extent)].flat[0]
    raise IndexOutOfRange(f"{where}: index {int(bad)} is out of range for an axis of {extent} "
                          f"(valid: {-extent}..{extent - 1})")


def indices_operand(op: str, position: int) -> bool:
    """Whether input `position` of an `op` node is a gather's indices (never fused as a prologue)."""
    return op in GATHERS and position == 1


def index_checks(graph: Graph) -> list[IndexCheck]:
    checks = []
    for node in graph.nodes:
        if node.op not in GATHERS or len(node.inputs) < 2:
            continue
        data = graph.type_of(node.inputs[0])
        axis = int(node.attr("axis", 0))
        axis = axis + len(data.shape) if axis < 0 else axis
        checks.append(IndexCheck(node.inputs[1], int(data.shape[axis]), node.name))
    return checks


__all__ = ["IndexCheck", "IndexOutOfRange", "check_indices", "index_checks", "indices_operand", "GATHERS"]
