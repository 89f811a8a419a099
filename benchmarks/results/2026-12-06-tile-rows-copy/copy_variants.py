import sys, json, time, numpy as np, tilegraph as tg
from tilegraph import workloads
from tilegraph.tune.database import SQLiteDatabase
from tilegraph.schedule import Schedule, Trace
spec=sys.argv[1]; dbp=sys.argv[2]
wl = workloads.from_spec(spec); tgt=tg.Target("cpu")
rec = SQLiteDatabase(dbp).best(wl.key, tgt.fingerprint)
t = json.loads(rec.trace_json)
insts = t["instructions"]
i = next(j for j,x in enumerate(insts) if x["kind"]=="cache_read" and x["inputs"]["buffer"]=="x")
base = insts[:i+1]
def I(kind, **inputs): return {"kind": kind, "inputs": inputs, "outputs": [], "decision": None}
fa = {"kind":"fuse","inputs":{"loops":["ax0","ax1","ax2"]},"outputs":["ax0_ax1_ax2_fused"],"decision":None}
variants = {
 "packed": insts,
 "unpacked": insts[:i],
 "fuse3": base + [fa, I("parallel", loop="ax0_ax1_ax2_fused")],
 "fuse3_cinner": base + [I("reorder", loops=["ax0","ax1","ax2","ax4","ax5","ax3"]), fa, I("parallel", loop="ax0_ax1_ax2_fused")],
}
kernels = {n: tg.build(Schedule.replay(wl, Trace.from_json(json.dumps({**t, "instructions": v}))), tgt) for n, v in variants.items()}
ins = [np.random.rand(*b.shape).astype(np.float32) for b in kernels["packed"].inputs]
ref = kernels["unpacked"](*ins)
for n,k in kernels.items(): print(n, float(np.abs(k(*ins)-ref).max()))
for th in (2,):
  for rnd in range(3):
    for name, k in kernels.items():
        for _ in range(10): k(*ins, num_threads=th)
        ts=[]
        for _ in range(50):
            s=time.perf_counter(); k(*ins, num_threads=th); ts.append(time.perf_counter()-s)
        print(th, name, round(np.median(ts)*1e3,3), "ms")
