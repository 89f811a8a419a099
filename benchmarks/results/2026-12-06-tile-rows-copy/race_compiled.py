import sys, time, numpy as np, tilegraph as tg, onnxruntime as ort
onnx_path, paths = sys.argv[1], sys.argv[2:]
models = {p: tg.load(p) for p in paths}
m0 = next(iter(models.values())); g = m0.graph
rng = np.random.default_rng(0)
feeds = {n: rng.standard_normal(g.type_of(n).shape).astype(np.float32) for n in m0.input_names}
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
runs = {p: (lambda m=m: m.run(feeds)) for p, m in models.items()}
runs["onnxruntime"] = lambda: sess.run(None, feeds)
ref = sess.run(None, feeds)[0]
for p, m in models.items():
    out = list(m.run(feeds).values())[0]
    print(p, "max rel err vs ORT", float(np.abs(out - ref).max() / np.abs(ref).max()))
res = {p: [] for p in runs}
names = list(runs)
for r in range(7):
    for p in (names if r % 2 == 0 else names[::-1]):
        f = runs[p]
        for _ in range(3): f()
        ts = []; t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
        res[p].append(np.median(ts))
for p in names:
    v = np.array(res[p]) * 1e3
    print(f"{p:22s} median {np.median(v):7.2f} ms  spread {(v.max()-v.min())/np.median(v)*100:3.0f}%")
