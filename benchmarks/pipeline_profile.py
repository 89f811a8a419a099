"""python -m benchmarks.pipeline_profile: where tuning time goes, per candidate and stage.

    python -m benchmarks.pipeline_profile --workloads GMM-4,C2D-2 --time 60 --threads 2 --out DIR

Per workload: "auto" (or --strategy) tunes for --time seconds in a fresh database, and the
session's pipeline profile (tune/pipeline_profile.py: propose, build, inputs, reference, run,
commit, notify on the search loop's path; replay/lower/print/compile in the builders and
load/check/time in the runner) is written with the candidates measured per second and the best
latency found. --target cuda (or opencl) profiles GPU tuning: nvcc builds, launches on the device.
With --against DIR (CPU targets only; the databases <workload>.db of another run, e.g. an older
tilegraph's, kept with --keep DIR), each workload's winner of this run and of that run are checked
against the float64 reference and timed in --rounds alternating rounds (median of round medians):
quality at equal tuning time. Writes pipeline_profile.md and .json to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="GMM-4,C2D-2,DEP-1,GRP-4,TBG-1,SFM-1")
    ap.add_argument("--time", type=float, default=60.0)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--target", default="cpu", help="cpu (the host), cuda, or any tilegraph target string")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--against", default=None, help="a folder of <workload>.db from another run: winners re-timed")
    ap.add_argument("--keep", default=None, help="keep this run's databases in this folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--full-timing", action="store_true",
                    help="time every candidate in full (MeasurePolicy time_once_over / stop_early_over off)")
    ap.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}-pipeline-profile")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import tilegraph as tg
    from tilegraph import workloads
    from tilegraph.target import Target
    from tilegraph.tune.measure import MeasurePolicy

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tilegraph-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    policy = MeasurePolicy(time_once_over=None, stop_early_over=None) if args.full_timing else MeasurePolicy()
    rows, text = [], []
    for wid in args.workloads.split(","):
        wl = workloads.get(wid)
        result = tg.tune(wl, target=args.target, strategy=args.strategy, time_budget=args.time, db=str(work / f"{wid}.db"),
                         num_threads=args.threads, seed=args.seed, progress=False, policy=policy)
        prof = result.profile
        rows.append({"workload": wid, "best_s": result.latency_s, "gflops": result.gflops,
                     "failed": result.failed, "slowest": prof.slowest(), **prof.to_json()})
        if args.against and args.target == "cpu":
            rows[-1].update(_retime(wl, work / f"{wid}.db", Path(args.against) / f"{wid}.db", args))
        text.append(f"### {wid}: best {result.latency_s * 1e3:.3f} ms ({result.gflops:.1f} GFLOP/s)\n\n"
                    f"```\n{prof.format()}\n```\n")
        print(text[-1], flush=True)
    target = Target(args.target)
    where = target.cpu_model if target.kind == "cpu" else target.device_name or target.kind
    head = (f"# Measurement pipeline profile\n\n`python -m benchmarks.pipeline_profile --workloads {args.workloads} "
            f"--time {args.time:g} --strategy {args.strategy} --threads {args.threads} --target {args.target}"
            f"{' --full-timing' if args.full_timing else ''}`, "
            f"{time.strftime('%Y-%m-%d %H:%M')}, {where} ({target.isa}), tilegraph {tg.__version__}\n\n"
            "| workload | candidates | candidates/s | best ms | slowest stages |"
            + (" against: candidates | winners re-timed, ms (this / that) | this run's speed-up |" if args.against else "")
            + "\n|---|---|---|---|---|" + ("---|---|---|" if args.against else "") + "\n")
    table = "".join(f"| {r['workload']} | {r['candidates']} | {r['candidates_per_s']:.2f} | {r['best_s'] * 1e3:.3f} | "
                    f"{', '.join(r['slowest'])} |" + (
                        f" {r['against_candidates']} | {r['this_ms']:.4g} / {r['that_ms']:.4g} | "
                        f"{r['that_ms'] / r['this_ms']:.3f}x |" if 'that_ms' in r else "") + "\n" for r in rows)
    (out / "pipeline_profile.md").write_text(head + table + "\n" + "\n".join(text))
    (out / "pipeline_profile.json").write_text(json.dumps(rows, indent=1))
    print(head + table)
    return 0


def _retime(wl, this_db: Path, that_db: Path, args: argparse.Namespace) -> dict:
    """Both runs' winners checked, then timed in alternating rounds (median of round medians)."""
    import statistics

    import numpy as np

    from tilegraph.runtime.host_memory import aligned_copy
    from tilegraph.runtime.timer import measure
    from tilegraph.testing import random_inputs, reference_outputs
    from tilegraph.tune.builder import Builder
    from tilegraph.tune.database import open_database

    if not that_db.exists():
        return {}
    kernels, counts = {}, {}
    builder = Builder(1, 300, "cpu")
    for name, path in (("this", this_db), ("that", that_db)):
        records = open_database(str(path)).records(wl.key)
        best = min((r for r in records if r.ok and r.latency_s), key=lambda r: r.latency_s)
        kernels[name] = builder.kernel(wl, best.trace_json, best.meta)
        counts[name] = len(records)
    builder.close()
    inputs = random_inputs(wl, seed=7)
    refs = reference_outputs(wl, inputs)
    launches = {}
    for name, kernel in kernels.items():
        got = kernel(*inputs, num_threads=args.threads)
        got = got if isinstance(got, (tuple, list)) else (got,)
        for x, r in zip(got, refs):
            np.testing.assert_allclose(x, r, rtol=1e-3, atol=1e-3, err_msg=f"{name} winner")
        launches[name] = kernel.bind([aligned_copy(x) for x in inputs], kernel.output_arrays(None), args.threads)
    samples: dict[str, list[float]] = {name: [] for name in launches}
    for _ in range(args.rounds):
        for name, launch in launches.items():
            samples[name].append(measure(launch.run, warmup=1, min_time=0.1).median)
    med = {name: statistics.median(v) for name, v in samples.items()}
    spread = max((max(v) - min(v)) / statistics.median(v) for v in samples.values())
    return {"this_ms": med["this"] * 1e3, "that_ms": med["that"] * 1e3, "against_candidates": counts["that"],
            "retime_spread": spread}


if __name__ == "__main__":
    raise SystemExit(main())
