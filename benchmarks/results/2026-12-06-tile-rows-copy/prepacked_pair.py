"""Gensor's constructed kernel of a workload with one input plain and marked constant, timed as a
compiled model runs them: the constant packed once where the kernel packs it, the rest timed.

    python prepacked_pair.py conv2d_nhwc:1,7,7,2048,512,1,1,0 1     (1: the weight's position)

3 rounds of 60 calls each, 2 threads.
"""

import json
import sys
import time

import numpy as np

import tilegraph as tg
from tilegraph import workloads
from tilegraph.graph.construct import construct_one
from tilegraph.lower.pipeline import lower
from tilegraph.lower.prepack import split_constant_packing
from tilegraph.runtime.prepacked import compiled_cpu_kernel, prepacked_kernels
from tilegraph.schedule import Schedule, Trace
from tilegraph.te.workload import Workload


def main(spec: str, position: int) -> None:
    plain, target = workloads.from_spec(spec), tg.Target("cpu")
    const = Workload(plain.inputs, plain.outputs, plain.op_name, constants=(position,))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(t.shape).astype(np.float32) for t in plain.inputs]
    runs = {}
    for name, wl in (("plain", plain), ("const", const)):
        trace = construct_one(wl, target)
        insts = json.loads(trace)["instructions"]
        print(name, "copies", [x["inputs"].get("buffer") for x in insts if x["kind"] == "cache_read"],
              "splits", [x["inputs"]["factors"] for x in insts if x["kind"] == "split"][:4])
        sch = Schedule.replay(wl, Trace.from_json(trace))
        lowered = lower(sch.func, target)
        n = len(wl.inputs)
        inputs, outputs = sch.func.params[:n], sch.func.params[n:]
        split = split_constant_packing(lowered, lowered.params[position].name, n)
        if split is None:
            kernel = compiled_cpu_kernel(lowered, inputs, outputs, target)
            runs[name] = lambda k=kernel: k(*args, num_threads=2)
            continue
        pack, compute = prepacked_kernels(inputs, outputs, position, split, target)
        packed = list(args)
        packed[position] = pack(args[position], num_threads=2)
        runs[name] = lambda c=compute, a=packed: c(*a, num_threads=2)
        print(name, "weight prepacked")
    print("max diff", float(np.abs(np.asarray(runs["const"]()) - np.asarray(runs["plain"]())).max()))
    for _ in range(3):
        for name, run in runs.items():
            for _ in range(10):
                run()
            samples = []
            for _ in range(60):
                start = time.perf_counter()
                run()
                samples.append(time.perf_counter() - start)
            print(name, round(float(np.median(samples)) * 1e3, 3), "ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
