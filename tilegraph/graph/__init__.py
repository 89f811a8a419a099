"""The graph level: models in, compiled models out.

    g = tg.graph.from_onnx("resnet50.onnx")        # or from_torch(module, example_inputs)
    print(g)                                       # one node per line, with shapes
    model = tg.compile(g, target="cpu")            # passes, kernels, a static memory plan
"""

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.frontends.onnx import from_onnx
from tilegraph.graph.ir import Graph, Node, TensorType
from tilegraph.graph.reference import run_reference

__all__ = ["Graph", "Node", "TensorType", "GraphBuilder", "from_onnx", "run_reference"]
