"""python -m benchmarks.dims_models: one model compiled once for a range of sequence lengths, raced
at several lengths against ONNX Runtime and against tilegraph compiled statically for each length.

    python -m benchmarks.dims_models --model bert --lengths 16,64,100,128,384 --budget 300 \\
        --static-budget 180 --threads 2 --out DIR [--expect]

The reference model (graph/zoo.py, random weights) is exported to ONNX with its sequence length a
dim_param `seq` (at most 512). tilegraph compiles it once with `dims={"seq": (1, 512)}` and
`--budget` seconds of tuning (every (task, bucket) pair under one task scheduler budget: buckets
1..16, 17..32, ..., 257..512; with --expect, each bucket weighed by the lengths in it), into its own
database. For each length, the same ONNX file is compiled
statically (`input_shapes`) with `--static-budget` seconds into another database (0: skipped), and
ONNX Runtime runs the file at that length; the three are timed alternately (graph/race.race: a
warm-up, then --rounds rounds, medians and spread), outputs compared with ONNX Runtime's. The
dims model is compiled once: the count of kernel builds after its compile is reported (0 expected).
Writes dims_models.md and dims_models.json into --out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    scale = max(float(np.abs(expected).max()), 1e-30)
    return float(np.abs(got.astype(np.float64) - expected.astype(np.float64)).max()) / scale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert", choices=("bert", "gpt2"))
    ap.add_argument("--small", action="store_true", help="the reduced test configuration of the model")
    ap.add_argument("--lengths", default="16,64,100,128,384")
    ap.add_argument("--upper", type=int, default=512, help="the range of seq is 1..UPPER")
    ap.add_argument("--budget", type=float, default=300.0, help="tuning seconds of the dims model, in all")
    ap.add_argument("--static-budget", type=float, default=180.0, help="tuning seconds of each static model (0: skip)")
    ap.add_argument("--static-db", default=None,
                    help="the static models' database (default OUT/static.db); with --static-budget 0 they are built "
                         "from its records as they are (an earlier run's), not skipped")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=2.0, help="timing seconds per contender and length")
    ap.add_argument("--out", default="dims_models")
    ap.add_argument("--db", default=None, help="the dims model's database (default OUT/dims.db)")
    ap.add_argument("--expect", action="store_true",
                    help="weigh the dims model's tuning to the buckets of --lengths (compile's expected=)")
    args = ap.parse_args(argv)

    import onnxruntime as ort

    import tilegraph as tg
    from tilegraph import driver
    from tilegraph.graph import zoo
    from tilegraph.graph.race import race
    from tilegraph.runtime import threads

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads.set_num_threads(args.threads)
    onnx_path = out / f"{args.model}{'_small' if args.small else ''}_seq.onnx"
    if not onnx_path.exists():
        zoo.export_onnx(args.model, onnx_path, small=args.small, dynamic=True)
    lengths = [int(x) for x in args.lengths.split(",")]
    started = time.perf_counter()
    dims_model = tg.compile(str(onnx_path), dims={"seq": (1, args.upper)}, time_budget=args.budget,
                            db=args.db or str(out / "dims.db"), num_threads=args.threads,
                            expected={"seq": lengths} if args.expect else None)
    dims_compile_s = time.perf_counter() - started
    print(dims_model.summary(), flush=True)
    if dims_model.tuning is not None:
        print(dims_model.tuning.table(), flush=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    rows: list[dict[str, Any]] = []
    builds: list[Any] = []
    real_build = driver.build
    for length in lengths:
        static = None
        if args.static_budget > 0 or args.static_db:
            static = tg.compile(str(onnx_path), input_shapes={name: (1, length)}, time_budget=args.static_budget,
                                db=args.static_db or str(out / "static.db"), num_threads=args.threads)
        ids = np.random.default_rng(length).integers(0, 1000, (1, length)).astype(np.int64)
        expected = session.run(None, {name: ids})[0]
        driver.build = lambda *a, **k: builds.append(a) or real_build(*a, **k)  # the dims model never builds
        try:
            got = dims_model(ids)[0]
            contenders = {"tilegraph (dims)": lambda ids=ids: dims_model(ids),
                          "onnxruntime": lambda ids=ids: session.run(None, {name: ids})}
            if static is not None:
                contenders["tilegraph (static)"] = lambda ids=ids, static=static: static(ids)
            times = race(contenders, rounds=args.rounds, seconds=args.seconds)
        finally:
            driver.build = real_build
        row = {"seq": length, "error_vs_ort": _relative_error(got, expected),
               **{f"{k}_ms": v.median_s * 1e3 for k, v in times.items()},
               **{f"{k}_spread": round(v.spread, 3) for k, v in times.items()}}
        row["vs_ort"] = times["onnxruntime"].median_s / times["tilegraph (dims)"].median_s
        if static is not None:
            row["vs_static"] = times["tilegraph (static)"].median_s / times["tilegraph (dims)"].median_s
            row["static_error_vs_ort"] = _relative_error(static(ids)[0], expected)
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"model": args.model, "small": args.small, "upper": args.upper, "budget_s": args.budget,
              "static_budget_s": args.static_budget, "threads": args.threads, "dims_compile_s": dims_compile_s,
              "expected_lengths": lengths if args.expect else None,
              "builds_after_compile": len(builds), "kernels": len(dims_model.kernel_objects), "rows": rows}
    (out / "dims_models.json").write_text(json.dumps(result, indent=1))
    lines = [f"# {args.model}: one model for seq 1..{args.upper} ({args.budget:.0f} s of tuning) against ONNX Runtime "
             f"and static compiles ({args.static_budget:.0f} s each), {args.threads} threads", "",
             f"dims model compiled in {dims_compile_s:.0f} s; kernel builds after that compile: {len(builds)}"
             + ("; its tuning weighed to the lengths' buckets (--expect)" if args.expect else ""), "",
             "| seq | dims ms | ORT ms | static ms | vs ORT | vs static | error vs ORT |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        static = f"{r['tilegraph (static)_ms']:.2f}" if "vs_static" in r else "-"
        vs_static = f"{r['vs_static']:.2f}x" if "vs_static" in r else "-"
        lines.append(f"| {r['seq']} | {r['tilegraph (dims)_ms']:.2f} | {r['onnxruntime_ms']:.2f} | {static} | "
                     f"{r['vs_ort']:.2f}x | {vs_static} | {r['error_vs_ort']:.1e} |")
    (out / "dims_models.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
