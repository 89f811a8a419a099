"""Compiled models (saved .tg folders) and ONNX Runtime on the same ONNX file, raced in one process.

    python race_compiled.py MODEL.onnx A.tg B.tg ...

7 alternating rounds (the order reversed every other round), each system called for 2 s after 3
warm-up calls; per system the median of the rounds' medians and their spread. 2 threads.
"""

import sys
import time

import numpy as np
import onnxruntime as ort

import tilegraph as tg


def main(onnx_path: str, paths: list[str]) -> None:
    models = {p: tg.load(p) for p in paths}
    first = next(iter(models.values()))
    rng = np.random.default_rng(0)
    feeds = {}
    for n in first.input_names:
        shape, dtype = first.graph.type_of(n).shape, str(first.graph.type_of(n).dtype)
        feeds[n] = (rng.integers(0, 1000, shape).astype(dtype) if "int" in dtype
                    else rng.standard_normal(shape).astype(np.float32))  # token ids, or pixels
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    runs = {p: (lambda m=m: m.run(feeds)) for p, m in models.items()}
    runs["onnxruntime"] = lambda: session.run(None, feeds)
    reference = session.run(None, feeds)[0]
    for p, m in models.items():
        out = next(iter(m.run(feeds).values()))
        print(p, "max rel err vs ORT", float(np.abs(out - reference).max() / np.abs(reference).max()))
    names = list(runs)
    rounds: dict[str, list[float]] = {p: [] for p in names}
    for r in range(7):
        for p in names if r % 2 == 0 else names[::-1]:
            for _ in range(3):
                runs[p]()
            samples = []
            began = time.perf_counter()
            while time.perf_counter() - began < 2.0:
                start = time.perf_counter()
                runs[p]()
                samples.append(time.perf_counter() - start)
            rounds[p].append(float(np.median(samples)))
    for p in names:
        ms = np.array(rounds[p]) * 1e3
        print(f"{p:22s} median {np.median(ms):7.2f} ms  spread {(ms.max() - ms.min()) / np.median(ms) * 100:3.0f}%")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
