"""python -m benchmarks.gpu_profile: where a whole model's time goes on a GPU, step by step.

    python -m benchmarks.gpu_profile --models gpt2 --target cuda --db-dir DIR --out OUT

Per model: exported to ONNX (graph/zoo.py), compiled untuned (an empty database: every kernel its
default schedule) and, where DIR holds NAME-tuned.db (benchmarks.gpu_models --db-dir keeps them),
compiled from those records (no tuning); each compiled model's in-situ profile (graph/profile.py:
every step launched, then the device synchronized) printed with its slowest steps, and the device
source of the --sources slowest kernels written to OUT/NAME-{untuned,tuned}-kernels.txt. On a
machine without a GPU, --target opencl runs the same on PoCL.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2")
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--db-dir", default=None, help="a folder of NAME-tuned.db (benchmarks.gpu_models --db-dir)")
    ap.add_argument("--seconds", type=float, default=2.0, help="profiling seconds per compiled model")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sources", type=int, default=4, help="the slowest kernels whose device source is written")
    ap.add_argument("--small", action="store_true", help="the reduced reference models")
    ap.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}-gpu-profile")
    args = ap.parse_args(argv)
    import numpy as np
    import onnxruntime as ort

    import tilegraph as tg
    from tilegraph.graph import zoo
    from tilegraph.tune.database import open_database

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tilegraph-gpu-profile-"))
    report = {}
    for name in args.models.split(","):
        path = zoo.export_onnx(name, work / f"{name}.onnx", small=args.small)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        inputs = {i.name: (rng.integers(0, 1000, [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.int64)
                           if "int" in i.type else
                           rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32))
                  for i in session.get_inputs()}
        expected = session.run(None, inputs)
        empty = work / f"{name}-untuned.db"
        open_database(str(empty)).close()
        dbs = {"untuned": empty}
        if args.db_dir and (Path(args.db_dir) / f"{name}-tuned.db").exists():
            dbs["tuned"] = Path(args.db_dir) / f"{name}-tuned.db"
        for label, db in dbs.items():
            started = time.perf_counter()
            model = tg.compile(str(path), target=args.target, db=str(db))
            compile_s = time.perf_counter() - started
            got = model.run(inputs)
            error = max(float(np.max(np.abs(g - e)) / (np.max(np.abs(e)) or 1.0))
                        for g, e in zip(got.values(), expected))
            prof = model.profile(inputs, seconds=args.seconds)
            head = (f"## {name} {label} on {model.target.device_name or args.target}: {len(model.steps)} steps, "
                    f"compiled in {compile_s:.1f} s, relative error {error:.2g}, "
                    f"launch mode {getattr(model, 'launch_mode', '-')}")
            print(head + "\n" + prof.table(top=args.top) + "\n", flush=True)
            slowest = sorted(prof.steps, key=lambda s: -s.seconds)[:args.sources]
            texts = []
            for s in slowest:
                kernel = model.kernel_objects[model.steps[s.index].kernel]
                texts.append(f"// step {s.index}: {s.seconds * 1e3:.3f} ms, {s.kernel} [{'+'.join(s.ops)}]\n"
                             f"{getattr(kernel, 'source', '(no source)')}\n")
            (out / f"{name}-{label}-kernels.txt").write_text("\n".join(texts))
            report[f"{name}-{label}"] = {"compile_s": compile_s, "error": error, **prof.to_json()}
    (out / "gpu_profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
