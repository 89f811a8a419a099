"""Whole-model tuning with the weights timed hot or evicted, then the compiled models raced.

    python tune_evict.py tune MODEL.onnx hot|evict BUDGET OUT_DIR     # fresh database, saved model
    python tune_evict.py race MODEL.onnx A_DIR B_DIR [ROUNDS]          # A, B and ONNX Runtime alternating

`evict` tunes with MeasurePolicy(evict_constants=True) (every TuneSession of the compile: the task
scheduler's and the fusion candidates'); `hot` with the policy as it was (evict_constants=False).
"""

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def tune(path: str, mode: str, budget: float, out: str) -> None:
    import tilegraph as tg
    from tilegraph.tune import session as session_module
    from tilegraph.tune.measure import MeasurePolicy

    original = session_module.TuneSession.__init__

    def init(self, target="cpu", db=None, options=None, **fields):
        fields.setdefault("policy", MeasurePolicy(evict_constants=(mode == "evict")))
        original(self, target, db, options, **fields)

    session_module.TuneSession.__init__ = init
    Path(out).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model = tg.compile(path, time_budget=budget, db=str(Path(out) / "records.db"), num_threads=2)
    seconds = time.perf_counter() - start
    model.save(str(Path(out) / "model"))
    report = getattr(model, "tuning", None)
    rows = []
    if report is not None:
        for row in report.rows:
            rows.append({k: (v if isinstance(v, (int, float, str)) or v is None else str(v))
                         for k, v in vars(row).items()})
    Path(out, "tune.json").write_text(json.dumps({"mode": mode, "budget": budget, "compile_s": seconds, "rows": rows},
                                                 indent=1))
    print(f"{mode}: compiled in {seconds:.1f} s -> {out}")


def feeds_for(path: str) -> dict:
    import onnx

    proto = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(0)
    feeds = {}
    for i in proto.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        integer = i.type.tensor_type.elem_type == 7
        feeds[i.name] = rng.integers(0, 1000, shape).astype(np.int64) if integer else \
            rng.standard_normal(shape).astype(np.float32)
    return feeds


def race(path: str, a: str, b: str, rounds: int) -> None:
    import onnxruntime as ort

    import tilegraph as tg

    feeds = feeds_for(path)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)[0]
    models = {Path(a).name: tg.load(str(Path(a) / "model")), Path(b).name: tg.load(str(Path(b) / "model"))}
    for name, m in models.items():
        out = next(iter(m.run(feeds).values()))
        print(name, "rel err vs ORT", float(np.abs(out - ref).max() / np.abs(ref).max()))
    runs = {name: (lambda m=m: m.run(feeds)) for name, m in models.items()}
    runs["onnxruntime"] = lambda: sess.run(None, feeds)
    names = list(runs)
    per = {n: [] for n in names}
    tg.set_num_threads(2)
    for r in range(rounds):
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
            per[n].append(statistics.median(ts))
    for n in names:
        med = statistics.median(per[n])
        spread = (max(per[n]) - min(per[n])) / med
        print(f"{n:12s} {med * 1e3:8.2f} ms  spread {spread * 100:.0f}%  rounds {[round(x * 1e3, 1) for x in per[n]]}")


if __name__ == "__main__":
    if sys.argv[1] == "tune":
        tune(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])
    else:
        race(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 7)
