"""A model compiled without and with one change, raced with ONNX Runtime (7 alternating rounds of 2 s).

    python race_pf.py MODEL.onnx [prefetch|outputs] [BUDGET]

prefetch: lower/passes/prefetch_packed_blocks.py replaced by the identity for the first compile;
outputs: the outputs copied out of the arena (CompiledModel._fresh_outputs returning none) for the
first compile. Was race_out.py for `outputs`.
"""

import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

import tilegraph as tg
from tilegraph.graph.model import CompiledModel
from tilegraph.lower.passes import prefetch_packed_blocks

path = sys.argv[1]
change = sys.argv[2] if len(sys.argv) > 2 else "prefetch"
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
owner, attribute, stand_in, labels = {
    "prefetch": (prefetch_packed_blocks, "run", lambda func, target, packed: func, ("no prefetch", "prefetch")),
    "outputs": (CompiledModel, "_fresh_outputs", lambda self, launches: [], ("copied out", "fresh")),
}[change]
real = getattr(owner, attribute)
setattr(owner, attribute, stand_in)
off = tg.compile(path, time_budget=budget) if budget else tg.compile(path)
setattr(owner, attribute, real)
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
    labels[0]: lambda: off.run(feeds),
    labels[1]: lambda: on.run(feeds),
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
