"""ONNX control flow whose path is known at compile time (registered into onnx_ops.CONVERTERS).

    If(cond)    the branch `cond` picks, converted in place (its nodes read the enclosing scope)

tilegraph compiles one static graph, so the condition must be a constant (computable before run
time). When it is computed from a model input, compile_model specialises on that input's value
(graph/specialize.py); otherwise the converter refuses naming the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.errors import GraphError
from tilegraph.graph.frontends.emitter import Emitter
from tilegraph.graph.frontends.onnx_ops import _out, converts


@converts("If")
def _if(e: Emitter, node: Any, ins: list[str], attrs: dict[str, Any], opset: int) -> list[str]:
    where = f"node {node.name!r} (If)"
    cond = np.asarray(e.value(ins[0], f"{where} condition"))
    if cond.size != 1:
        raise GraphError(f"{where}: the condition must hold one value, got {cond.size}")
    if e.subgraph is None:
        raise GraphError(f"{where}: this frontend does not convert subgraphs")
    branch = attrs["then_branch"] if bool(cond.reshape(-1)[0]) else attrs["else_branch"]
    odd = [o.name for o in branch.output if o.type.WhichOneof("value") not in (None, "tensor_type")]
    if odd:
        raise GraphError(f"{where}: branch outputs {odd} are sequences or optionals (tilegraph compiles tensors)")
    outs = e.subgraph(branch, f"{where} {'then' if bool(cond.reshape(-1)[0]) else 'else'} branch")
    if len(outs) != len(node.output):
        raise GraphError(f"{where}: the branch gives {len(outs)} outputs, the node has {len(node.output)}")
    return [e.emit("identity", [o], name=f"{node.name}_out{i}", outputs=[_out(node, i)])
            for i, o in enumerate(outs)]
