"""python -m benchmarks.quality_time: what more tuning time buys — "auto" at 15/60/240 s against Gensor.

    python -m benchmarks.quality_time --workloads GMM-4,C2D-2 --budget 240 --checkpoints 15,60 --threads 2

Per workload: Gensor tunes (its own database; it stops after its ranked candidates), then "auto"
tunes for --budget seconds in a fresh database. The best record "auto" had measured by each
checkpoint (records carry their commit time) is its result for that budget: the 15-s and 60-s
columns are checkpoints of the one long run (a shorter run differs only in that its last batch
is cut to fit). Then every kernel (Gensor's best, auto's best at each checkpoint) is checked
against the float64 reference and timed in alternating rounds at --threads (runtime.timer.measure
of the kernel bound to its arrays, as the tuner times it; median of the round medians). Writes
quality_time.md / .csv / .png to --out.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="GMM-4,C2D-2,DEP-1,GRP-4,TBG-1,SFM-1")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--checkpoints", default="15,60")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}-quality-time")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import tilegraph as tg
    from tilegraph import workloads
    from tilegraph.runtime.host_memory import aligned_copy
    from tilegraph.runtime.timer import measure
    from tilegraph.testing import random_inputs, reference_outputs
    from tilegraph.tune.builder import Builder
    from tilegraph.tune.database import open_database

    checkpoints = [float(c) for c in args.checkpoints.split(",") if c] + [args.budget]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="tilegraph-quality-"))
    for wid in args.workloads.split(","):
        wl = workloads.get(wid)
        g = tg.tune(wl, strategy="gensor", db=str(work / f"{wid}-gensor.db"), num_threads=args.threads, progress=False)
        start = time.time()
        a = tg.tune(wl, strategy="auto", time_budget=args.budget, db=str(work / f"{wid}-auto.db"),
                    num_threads=args.threads, progress=False)
        db = open_database(str(work / f"{wid}-auto.db"))
        records = [r for r in db.records(wl.key) if r.ok and r.latency_s]
        builder = Builder(1, 300, "cpu")
        systems = {"gensor": g.kernel}
        for c in checkpoints:
            seen = [r for r in records if r.created - start <= c]
            best = min(seen, key=lambda r: r.latency_s) if seen else None
            systems[f"auto@{c:g}s"] = builder.kernel(wl, best.trace_json, best.meta) if best else None
        builder.close()
        inputs = random_inputs(wl, seed=7)
        refs = reference_outputs(wl, inputs)
        samples: dict[str, list[float]] = {k: [] for k, v in systems.items() if v is not None}
        for name in samples:
            got = systems[name](*inputs, num_threads=args.threads)
            got = got if isinstance(got, (tuple, list)) else (got,)
            for x, r in zip(got, refs):
                np.testing.assert_allclose(x, r, rtol=1e-3, atol=1e-3, err_msg=f"{wid} {name}")
        # each kernel bound to its arrays once (what the tuner times): no output allocation per call
        launches = {name: systems[name].bind([aligned_copy(x) for x in inputs],
                                             systems[name].output_arrays(None), args.threads) for name in samples}
        for _ in range(args.rounds):
            for name in samples:
                samples[name].append(measure(launches[name].run, warmup=1, min_time=0.1).median)
        med = {k: statistics.median(v) for k, v in samples.items()}
        spread = {k: (max(v) - min(v)) / statistics.median(v) for k, v in samples.items()}
        row = {"workload": wid, "gensor_ms": med["gensor"] * 1e3, "gensor_tuning_s": g.tuning_time_s,
               "auto_measured": a.measured, "auto_tuning_s": a.tuning_time_s}
        for c in checkpoints:
            key = f"auto@{c:g}s"
            row[f"{key}_ms"] = med[key] * 1e3 if key in med else math.nan
            row[f"{key}_speedup"] = med["gensor"] / med[key] if key in med else math.nan
            row[f"{key}_spread"] = spread.get(key, math.nan)
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    _write(out, rows, checkpoints, args)
    return 0


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _write(out: Path, rows: list[dict], checkpoints: list[float], args: argparse.Namespace) -> None:
    with open(out / "quality_time.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    keys = [f"auto@{c:g}s" for c in checkpoints]
    lines = [f"# auto vs Gensor by tuning time ({args.threads} threads, {args.rounds} alternating rounds, medians)", "",
             "| workload | gensor ms (tuning s) | " + " | ".join(f"{k} ms (x gensor)" for k in keys) + " | auto measured |",
             "|---|---|" + "---|" * len(keys) + "---|"]
    for r in rows:
        cells = " | ".join(f"{r[k + '_ms']:.4g} ({r[k + '_speedup']:.2f}x)" for k in keys)
        gensor = f"{r['gensor_ms']:.4g} ({r['gensor_tuning_s']:.0f})"
        lines.append(f"| {r['workload']} | {gensor} | {cells} | {int(r['auto_measured'])} |")
    lines.append("| geomean | | " + " | ".join(f"{_geomean([r[k + '_speedup'] for r in rows]):.3f}x" for k in keys) + " | |")
    (out / "quality_time.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for r in rows:
            ax.plot(checkpoints, [r[k + "_speedup"] for k in keys], marker="o", label=r["workload"])
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xticks(checkpoints, [f"{c:g}" for c in checkpoints])
        ax.minorticks_off()
        ax.set_xlabel("tuning time per workload (s)")
        ax.set_ylabel("speed-up over Gensor")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "quality_time.png", dpi=120)
    except ImportError:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
