import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

big = np.ones(100 << 20, np.float32)
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
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    a = np.random.randn(1, M, K).astype(np.float32)
    f = lambda s=s, a=a: s.run(None, {"a": a})  # noqa: E731
    for _ in range(5):
        f()
    hot = []
    cold = []
    for _ in range(11):
        t = time.perf_counter()
        f()
        hot.append(time.perf_counter() - t)
    for _ in range(9):
        big += 1.0
        t = time.perf_counter()
        f()
        cold.append(time.perf_counter() - t)
    print(f"ort {M}x{K}x{N}: hot {statistics.median(hot) * 1e3:.3f} cold {statistics.median(cold) * 1e3:.3f} ms")
