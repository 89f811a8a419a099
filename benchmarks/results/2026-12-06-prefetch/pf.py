"""Build Gensor's top candidate of a GEMM with packed B; time hot and cold; optionally a patched C file."""

import mmap
import os
import statistics
import sys
import time

import numpy as np

import tilegraph as tg
from tilegraph import ops
from tilegraph.build.compile import compile_c
from tilegraph.codegen.c import codegen_c
from tilegraph.graph.construct import CONSTRUCT_WALKS
from tilegraph.loop.printer import func_str
from tilegraph.lower.passes import prefetch_packed_blocks
from tilegraph.lower.pipeline import lower
from tilegraph.lower.prepack import split_constant_packing
from tilegraph.runtime.host_memory import aligned_zeros
from tilegraph.runtime.kernel import Kernel
from tilegraph.runtime.prepacked import compiled_cpu_kernel
from tilegraph.schedule import Schedule, Trace
from tilegraph.te import placeholder
from tilegraph.te.workload import Workload
from tilegraph.tune.gensor.markov import MarkovConfig
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy

B, M, K, N = map(int, sys.argv[1].split(","))
pick = int(sys.argv[2])
patched = sys.argv[3:]
a, b = placeholder((B, M, K), "float32", "a"), placeholder((K, N), "float32", "b")
wl = Workload([a, b], [ops.matmul_nd(a, b)], "matmul_nd", constants=(1,))
target = tg.Target("cpu")
rng = np.random.default_rng(0)
args = []
for t in wl.inputs:
    z = aligned_zeros(t.shape, np.float32)
    z[...] = rng.standard_normal(t.shape)
    args.append(z)
ctx = TuneContext(wl, target, 0, None, trials_left=1)
cands = GensorStrategy(top_k=pick + 1, config=MarkovConfig(max_walks=CONSTRUCT_WALKS)).propose(ctx, pick + 1)
c = cands[pick]
print("state", c.meta["state"])
sch = Schedule.replay(wl, Trace.from_json(c.trace_json))
lowered = lower(sch.func, target)
n = 2
inputs, outputs = sch.func.params[:n], sch.func.params[n:]
split = split_constant_packing(lowered, lowered.params[1].name, n)
pack = compiled_cpu_kernel(split.pack, [inputs[1]], [split.packed], target)
packed = pack(args[1], num_threads=2)
cin = [split.packed if j == 1 else x for j, x in enumerate(inputs)]
src = codegen_c(split.compute)
open(f"/tmp/exp/pf_{M}_{K}_{N}_{pick}.c", "w").write(src.code)
kernels = {
    "orig": Kernel(
        str(compile_c(src.code, target, name=src.entry, thread_pool=True)),
        src.entry,
        cin,
        list(outputs),
        src.code,
        target,
        split.compute,
    )
}

withpf = prefetch_packed_blocks.run(split.compute, target, split.packed.name)
print("pass applied:", withpf is not split.compute)
print("\n".join(line for line in func_str(withpf).splitlines() if "prefetch" in line))
src2 = codegen_c(withpf)
kernels["pass"] = Kernel(
    str(compile_c(src2.code, target, name=src2.entry, thread_pool=True)),
    src2.entry,
    cin,
    list(outputs),
    src2.code,
    target,
    withpf,
)
for p in patched:
    code = open(p).read()
    kernels[p] = Kernel(
        str(compile_c(code, target, name=src.entry, thread_pool=True)),
        src.entry,
        cin,
        list(outputs),
        code,
        target,
        split.compute,
    )
ref = np.einsum("bmk,kn->bmn", args[0].astype(np.float64), args[1].astype(np.float64))
big = np.ones(100 << 20, np.float32)
ncopy = max(2, int(400e6 // packed.nbytes))
copies = []

HUGE = os.environ.get("HUGE") == "1"


def huge_zeros(shape, dtype):
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    size = (nbytes + (4 << 20) + (2 << 20) - 1) // (2 << 20) * (2 << 20)
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = np.frombuffer(mm, np.uint8)
    off = (-base.ctypes.data) % (2 << 20)
    mm.madvise(mmap.MADV_HUGEPAGE)
    return base[off : off + nbytes].view(dtype).reshape(shape)


for _ in range(ncopy):
    z = huge_zeros(packed.shape, packed.dtype) if HUGE else aligned_zeros(packed.shape, packed.dtype)
    z[...] = packed
    copies.append(z)
flops = 2 * B * M * K * N
runs = {}
for name, k in kernels.items():
    out = aligned_zeros((B, M, N), np.float32)
    L = k.bind([args[0], packed], [out], num_threads=2)
    L.run()
    rot = [k.bind([args[0], p], [out], num_threads=2) for p in copies]
    err = np.abs(out - ref).max() / np.abs(ref).max()
    runs[name] = (L, err, rot)
res = {name: ([], [], []) for name in runs}
for _round in range(5):
    for name, (L, _err, rot) in runs.items():
        for _ in range(3):
            L.run()
        for _ in range(7):
            t = time.perf_counter_ns()
            L.run()
            res[name][0].append(time.perf_counter_ns() - t)
        for _ in range(5):
            big.sum()
            t = time.perf_counter_ns()
            L.run()
            res[name][1].append(time.perf_counter_ns() - t)
        for R in rot[:15]:
            t = time.perf_counter_ns()
            R.run()
            res[name][2].append(time.perf_counter_ns() - t)
        rot.append(rot.pop(0))
print(open("/proc/self/smaps_rollup").read().split("AnonHugePages:")[1].split(chr(10))[0])
for name, (hot, cold, rr) in res.items():
    h, c, r = statistics.median(hot) / 1e6, statistics.median(cold) / 1e6, statistics.median(rr) / 1e6
    print(
        f"{name:30s} hot {h:.3f} ms ({flops / h / 1e6:.0f} GF/s)  cold {c:.3f} ms ({flops / c / 1e6:.0f} GF/s) "
        f"rotating {r:.3f} ms ({flops / r / 1e6:.0f})  err {runs[name][1]:.1e}"
    )
