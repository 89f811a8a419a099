"""Per step: in-situ median vs the same launch repeated alone (hot)."""

import statistics
import sys
import time

import numpy as np
import onnx

import tilegraph as tg
from tilegraph.graph.profile import profile_model

path = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 8
budget = float(sys.argv[3]) if len(sys.argv) > 3 else None
m = tg.compile(path, time_budget=budget) if budget else tg.compile(path)
proto = onnx.load(path, load_external_data=False)
rng = np.random.default_rng(0)
feeds = {}
for i in proto.graph.input:
    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
    et = i.type.tensor_type.elem_type
    feeds[i.name] = (
        rng.integers(0, 1000, shape).astype(np.int64) if et == 7 else rng.standard_normal(shape).astype(np.float32)
    )
prof = profile_model(m, feeds, seconds=4.0)
rows = sorted(prof.steps, key=lambda s: -s.seconds)
print(f"e2e {prof.end_to_end_s * 1e3:.2f} ms, sum {prof.kernel_sum_s * 1e3:.2f}")
launches = m._launches
seen = set()
tot_in, tot_alone = 0.0, 0.0
alone = {}
for s in prof.steps:
    key = m.steps[s.index].kernel
    L = launches[s.index]
    for _ in range(3):
        L.run()
    ts = []
    for _ in range(15):
        t = time.perf_counter_ns()
        L.run()
        ts.append(time.perf_counter_ns() - t)
    alone[s.index] = statistics.median(ts) / 1e9
    tot_in += s.seconds
    tot_alone += alone[s.index]
big = np.ones(100 << 20, np.float32)
cold = {}
for s in rows[:top]:
    L = launches[s.index]
    ts = []
    for _ in range(9):
        big += 1.0
        t = time.perf_counter_ns()
        L.run()
        ts.append(time.perf_counter_ns() - t)
    cold[s.index] = statistics.median(ts) / 1e9
for s in rows[:top]:
    print(f"cold {cold[s.index] * 1e3:8.3f}", end=" ")
    print(
        f"#{s.index:4d} in-situ {s.seconds * 1e3:8.3f}  alone {alone[s.index] * 1e3:8.3f}  "
        f"x{s.seconds / alone[s.index]:.2f}  {s.kernel} {'+'.join(dict.fromkeys(s.ops))}"
    )
print(f"sum in-situ {tot_in * 1e3:.2f}  alone {tot_alone * 1e3:.2f}")
