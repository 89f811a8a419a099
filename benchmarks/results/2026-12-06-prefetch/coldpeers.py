"""GPT-2's GEMMs in a peer, timed hot and cold (the caches evicted before each call), 2 threads.

    python coldpeers.py onnxruntime|openvino|torch [write|read]

Cold evicts by writing a 400 MB buffer (the numbers in output.txt), or by reading it.
"""

import statistics
import sys
import time

import numpy as np

SHAPES = [(128, 3072, 768), (128, 768, 3072), (128, 768, 50257)]


def _onnx_matmul(weights: np.ndarray, m: int) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    k, n = weights.shape
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, n])],
        [numpy_helper.from_array(weights, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def runner(peer: str, weights: np.ndarray, a: np.ndarray):
    """A call of the peer computing a[0] . weights, with the weights its own constant."""
    if peer == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        session = ort.InferenceSession(_onnx_matmul(weights, a.shape[1]), options, providers=["CPUExecutionProvider"])
        return lambda: session.run(None, {"a": a})
    if peer == "openvino":
        import openvino as ov

        core = ov.Core()
        model = core.read_model(_onnx_matmul(weights, a.shape[1]), b"")
        request = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 2,
                                                    "INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
        return lambda: request.infer({0: a})
    import torch

    torch.set_num_threads(2)
    x, w = torch.from_numpy(a[0]), torch.from_numpy(weights.T.copy())
    return lambda: torch.nn.functional.linear(x, w)


def main(peer: str, evict: str) -> None:
    big = np.ones(100 << 20, np.float32)
    for m, k, n in SHAPES:
        call = runner(peer, np.random.randn(k, n).astype(np.float32), np.random.randn(1, m, k).astype(np.float32))
        for _ in range(5):
            call()
        hot, cold = [], []
        for _ in range(11):
            t = time.perf_counter()
            call()
            hot.append(time.perf_counter() - t)
        for _ in range(9):
            if evict == "write":
                big += 1.0
            else:
                big.sum()
            t = time.perf_counter()
            call()
            cold.append(time.perf_counter() - t)
        print(f"{peer} {m}x{k}x{n}: hot {statistics.median(hot) * 1e3:.3f} cold {statistics.median(cold) * 1e3:.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "write")
