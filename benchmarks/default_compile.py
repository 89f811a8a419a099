"""python -m benchmarks.default_compile: what `tg.compile(model)` gives with no tuning budget.

    python -m benchmarks.default_compile --models resnet50,mobilenet_v2,bert,gpt2 --out DIR
    python -m benchmarks.default_compile --defaults constructed     # the default only (not construct=False)

For each reference model (ONNX exported from the zoo's transformers definitions, random weights,
batch 1) and each default: "constructed" (Gensor's schedule for every task, the default) and
"plain" (`construct=False`, the plain default schedules), one fresh process compiles the model with
a fresh build cache, construction cache and database (the compile time is a first compile's), checks
it against ONNX Runtime and races the two (alternating rounds, medians; graph/race.py) at
--threads threads. Writes default_compile.jsonl and default_compile.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
import numpy as np
import tilegraph as tg
from tilegraph.graph.race import peer, race
from tilegraph.runtime import threads

path, construct, n_threads, seconds = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), float(sys.argv[4])
threads.set_num_threads(n_threads)
began = time.perf_counter()
model = tg.compile(path, construct=construct)
compile_s = time.perf_counter() - began
rng = np.random.default_rng(0)
inputs = {}
for name in model.input_names:
    t = model.graph.type_of(name)
    data = rng.integers(0, 100, t.shape) if "int" in t.dtype else rng.standard_normal(t.shape)
    inputs[name] = data.astype(t.dtype)
ort, ort_outputs = peer("onnxruntime", path, None, inputs, n_threads)
ours = model.run(inputs)
error = max(float(np.max(np.abs(ours[n] - e)) / (np.max(np.abs(e)) + 1e-12)) for n, e in zip(model.output_names, ort_outputs()))
times = race({"tilegraph": lambda: model.run(inputs), "onnxruntime": ort}, rounds=5, seconds=seconds)
print(json.dumps({"compile_s": round(compile_s, 1), "constructed": len(model.constructed), "kernels": len(model.kernel_objects),
                  "relative_error": error, "tilegraph_ms": times["tilegraph"].median_s * 1e3,
                  "tilegraph_spread": times["tilegraph"].spread, "onnxruntime_ms": times["onnxruntime"].median_s * 1e3,
                  "onnxruntime_spread": times["onnxruntime"].spread}))
"""


def model_path(name: str) -> Path:
    """The reference model's ONNX file (exported once into the cache)."""
    from tilegraph import config
    from tilegraph.graph import zoo

    path = config.cache_dir() / "models" / f"{name}.onnx"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        zoo.export_onnx(name, path.with_suffix(".tmp.onnx"))
        path.with_suffix(".tmp.onnx").replace(path)
    return path


def run_one(path: Path, construct: bool, n_threads: int, seconds: float) -> dict:
    # a first compile: no kernel built, no schedule constructed and no fusion candidate measured
    # before (the database keeps candidates' costs, so it is fresh too)
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "TILEGRAPH_CACHE_DIR": cache, "TILEGRAPH_DATA_DIR": data}
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), "1" if construct else "0", str(n_threads),
                               str(seconds)], env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.default_compile", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet50,mobilenet_v2,bert,gpt2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per contender (5 alternating rounds)")
    parser.add_argument("--defaults", default="constructed,plain",
                        help="which defaults to compile: constructed (Gensor's schedules), plain (construct=False)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    defaults = [d.strip() for d in args.defaults.split(",") if d.strip()]
    if not defaults or set(defaults) - {"constructed", "plain"}:
        parser.error(f"--defaults takes constructed and/or plain, got {args.defaults!r}")
    out = Path(args.out or f"benchmarks/results/{time.strftime('%Y-%m-%d')}-default-compile")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        path = model_path(name)
        for construct in [d == "constructed" for d in defaults]:
            row = {"model": name, "default": "constructed" if construct else "plain",
                   **run_one(path, construct, args.threads, args.seconds)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "default_compile.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    isa = os.environ.get("TILEGRAPH_HOST_ISA")
    prefix = f"TILEGRAPH_HOST_ISA={isa} " if isa else ""
    lines = [f"`{prefix}python -m benchmarks.default_compile --models {args.models} --defaults {args.defaults} "
             f"--threads {args.threads}`", "",
             "| model | default | compile s | constructed / kernels | tilegraph ms | ONNX Runtime ms "
             "| ORT time / tilegraph time | max rel. error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['default']} | failed: {r['error']} | | | | | |")
            continue
        lines.append(f"| {r['model']} | {r['default']} | {r['compile_s']} | {r['constructed']} / {r['kernels']} | "
                     f"{r['tilegraph_ms']:.2f} (spread {r['tilegraph_spread']:.2f}) | {r['onnxruntime_ms']:.2f} | "
                     f"{r['onnxruntime_ms'] / r['tilegraph_ms']:.2f}x | {r['relative_error']:.1e} |")
    (out / "default_compile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
