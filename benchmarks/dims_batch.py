"""python -m benchmarks.dims_batch: one model compiled once for a range of batch sizes, raced at
several batch sizes against ONNX Runtime and against tilegraph compiled statically for each size.

    python -m benchmarks.dims_batch --model resnet50 --batches 1,2,4,8 --upper 8 [--budget S] \\
        --threads 2 --out DIR

The reference model (graph/zoo.py, random weights) is exported to ONNX (the TorchScript exporter)
with its batch a dim_param `batch` (bert and gpt2: their sequence length `seq` too, raced at
--seq). tilegraph compiles it once with `dims={"batch": (1, UPPER)}` (and `"seq": (1, SEQ)`),
--budget seconds of tuning (0: untuned, Gensor's constructed schedules); for each batch size the
same file is compiled statically (`input_shapes`) with the same budget, and ONNX Runtime runs it;
the three are timed alternately (graph/race.race: a warm-up, then --rounds rounds, medians and
spread), outputs compared with ONNX Runtime's. Writes dims_batch.md and dims_batch.json into --out.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.dims_models import _relative_error
from tilegraph.graph.zoo import IMAGE


def _inputs(model: str, batch: int, seq: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if model in ("resnet50", "mobilenet_v2"):
        return rng.standard_normal((batch, 3, IMAGE, IMAGE)).astype(np.float32)
    return rng.integers(0, 1000, (batch, seq)).astype(np.int64)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", choices=("resnet50", "mobilenet_v2", "bert", "gpt2"))
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--upper", type=int, default=8, help="the range of batch is 1..UPPER")
    ap.add_argument("--seq", type=int, default=128, help="bert/gpt2: the length raced (the range of seq is 1..SEQ)")
    ap.add_argument("--budget", type=float, default=0.0, help="tuning seconds of each model (0: untuned)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=2.0, help="timing seconds per contender and size")
    ap.add_argument("--out", default="dims_batch")
    args = ap.parse_args(argv)

    import onnxruntime as ort

    import tilegraph as tg
    from tilegraph.graph import zoo
    from tilegraph.graph.race import race
    from tilegraph.runtime import threads

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads.set_num_threads(args.threads)
    text = args.model in ("bert", "gpt2")
    onnx_path = out / f"{args.model}_batch.onnx"
    if not onnx_path.exists():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zoo.export_onnx(args.model, onnx_path, exporter="legacy", dynamic=text, dynamic_batch=True)
    dims = {"batch": (1, args.upper), **({"seq": (1, args.seq)} if text else {})}
    batches = [int(x) for x in args.batches.split(",")]
    budget = {"time_budget": args.budget, "num_threads": args.threads} if args.budget > 0 else {"num_threads": args.threads}
    started = time.perf_counter()
    dims_model = tg.compile(str(onnx_path), dims=dims, db=str(out / "dims.db"), **budget)
    dims_compile_s = time.perf_counter() - started
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    rows: list[dict[str, Any]] = []
    for batch in batches:
        x = _inputs(args.model, batch, args.seq, batch)
        static = tg.compile(str(onnx_path), input_shapes={name: x.shape}, db=str(out / "static.db"), **budget)
        expected = session.run(None, {name: x})[0]
        times = race({"tilegraph (dims)": lambda x=x: dims_model(x),
                      "onnxruntime": lambda x=x: session.run(None, {name: x}),
                      "tilegraph (static)": lambda x=x, static=static: static(x)},
                     rounds=args.rounds, seconds=args.seconds)
        row = {"batch": batch, "error_vs_ort": _relative_error(dims_model(x)[0], expected),
               **{f"{k}_ms": v.median_s * 1e3 for k, v in times.items()},
               **{f"{k}_spread": round(v.spread, 3) for k, v in times.items()}}
        row["vs_ort"] = times["onnxruntime"].median_s / times["tilegraph (dims)"].median_s
        row["vs_static"] = times["tilegraph (static)"].median_s / times["tilegraph (dims)"].median_s
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"model": args.model, "upper": args.upper, "seq": args.seq if text else None, "budget_s": args.budget,
              "threads": args.threads, "dims_compile_s": dims_compile_s, "rows": rows}
    (out / "dims_batch.json").write_text(json.dumps(result, indent=1))
    shape = f"batch 1..{args.upper}" + (f", seq 1..{args.seq} (raced at {args.seq})" if text else "")
    lines = [f"# {args.model}: one model for {shape} against ONNX Runtime and static compiles, "
             f"{'untuned' if args.budget <= 0 else f'{args.budget:.0f} s of tuning each'}, {args.threads} threads", "",
             f"dims model compiled in {dims_compile_s:.0f} s", "",
             "| batch | dims ms | ORT ms | static ms | vs ORT | vs static | error vs ORT |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['tilegraph (dims)_ms']:.2f} | {r['onnxruntime_ms']:.2f} | "
                     f"{r['tilegraph (static)_ms']:.2f} | {r['vs_ort']:.2f}x | {r['vs_static']:.2f}x | "
                     f"{r['error_vs_ort']:.1e} |")
    (out / "dims_batch.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
