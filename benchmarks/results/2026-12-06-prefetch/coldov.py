import statistics
import time

import numpy as np
import onnx
import openvino as ov
from onnx import TensorProto, helper, numpy_helper

big = np.ones(100 << 20, np.float32)
core = ov.Core()
for M, K, N in [(128, 3072, 768), (128, 768, 3072), (128, 768, 50257)]:
    w = np.random.randn(K, N).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, M, N])],
        [numpy_helper.from_array(w, "w")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, "/tmp/exp/mm.onnx")
    cm = core.compile_model(
        core.read_model("/tmp/exp/mm.onnx"), "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32"}
    )
    req = cm.create_infer_request()
    a = np.random.randn(1, M, K).astype(np.float32)
    f = lambda req=req, a=a: req.infer({0: a})  # noqa: E731
    for _ in range(5):
        f()
    hot = []
    cold = []
    for _ in range(11):
        t = time.perf_counter()
        f()
        hot.append(time.perf_counter() - t)
    for _ in range(9):
        big.sum()
        t = time.perf_counter()
        f()
        cold.append(time.perf_counter() - t)
    print(f"ov {M}x{K}x{N}: hot {statistics.median(hot) * 1e3:.3f} cold {statistics.median(cold) * 1e3:.3f} ms")
