"""GPT-2/BERT/ResNet compiled without and with the packed-block prefetch, raced with ORT (7 alternating rounds)."""

import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

import tilegraph as tg
from tilegraph.graph.model import CompiledModel as P

path = sys.argv[1]
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
real = P._fresh_outputs
P._fresh_outputs = lambda self, launches: []
off = tg.compile(path, time_budget=budget) if budget else tg.compile(path)
P._fresh_outputs = real
on = tg.compile(path, time_budget=budget) if budget else tg.compile(path)
proto = onnx.load(path, load_external_data=False)
rng = np.random.default_rng(0)
feeds = {}
for i in proto.graph.input:
    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
    feeds[i.name] = (
        rng.integers(0, 1000, shape).astype(np.int64)
        if i.type.tensor_type.elem_type == 7
        else rng.standard_normal(shape).astype(np.float32)
    )
so = ort.SessionOptions()
so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
ref = sess.run(None, feeds)[0]
for name, m in (("off", off), ("on", on)):
    out = next(iter(m.run(feeds).values()))
    print(name, "rel err", float(np.abs(out - ref).max() / np.abs(ref).max()))
runs = {
    "copied out": lambda: off.run(feeds),
    "fresh": lambda: on.run(feeds),
    "onnxruntime": lambda: sess.run(None, feeds),
}
names = list(runs)
rounds = {n: [] for n in names}
tg.set_num_threads(2)
for r in range(7):
    for n in names if r % 2 == 0 else names[::-1]:
        f = runs[n]
        for _ in range(3):
            f()
        ts = []
        end = time.perf_counter() + 2.0
        while time.perf_counter() < end or len(ts) < 3:
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        rounds[n].append(statistics.median(ts))
for n in names:
    med = statistics.median(rounds[n])
    spread = (max(rounds[n]) - min(rounds[n])) / med
    print(f"{n:12s} {med * 1e3:8.2f} ms  spread {spread * 100:.0f}%  rounds {[round(x * 1e3, 1) for x in rounds[n]]}")
