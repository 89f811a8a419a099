"""python -m benchmarks.dims_regret: what a kernel with run-time dims costs against one tuned for the size.

    python -m benchmarks.dims_regret --buckets 1,64,128,256 --k 768 --n 768 --trials 16 --threads 2 --out DIR

A GEMM C[m, N] = A[m, K] @ B[K, N] with m a run-time dim in [1, last upper] (a projection of a
sequence of m tokens), stored at the range's upper bound, one kernel per bucket (m in (previous
upper, upper]) from `tg.tune_buckets` (each tuned at its bucket's upper bound, --trials each, seeded
with the bucket below's best). Each probe size m (the bucket's lowest, a middle one, its upper
bound) is also tuned as a static workload with the same strategy and trials. Both kernels are
checked against the float64 reference and timed alternately (runtime.timer.measure of each bound
to its arrays, one discarded round, then --rounds rounds, medians and spreads). The regret of a probe is t(bucket kernel) /
t(static kernel): what serving the size from its bucket costs. Writes dims_regret.md / .csv.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
from pathlib import Path

import numpy as np


def gemm(m: object, k: int, n: int):  # noqa: ANN201
    from tilegraph import te

    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.Workload([a, b], [c])


def softmax_rows(n: object, rows: int = 64):  # noqa: ANN201
    """Softmax over a row of run-time length (the attention scores of one head over n keys)."""
    from tilegraph import ops, te

    x = te.placeholder((rows, n), name="x")
    return te.Workload([x], [ops.softmax(x)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--buckets", default="1,64,128,256", help="upper bounds of the buckets, ascending")
    ap.add_argument("--op", choices=("gemm", "softmax"), default="gemm",
                    help="gemm: m x K . K x N, m run-time; softmax: 64 rows of run-time length m")
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=768)
    ap.add_argument("--strategy", default="gensor")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default="dims_regret")
    args = ap.parse_args(argv)

    import tilegraph as tg
    from tilegraph.runtime.timer import measure
    from tilegraph.te.dims import dim, dims_array

    uppers = [int(x) for x in args.buckets.split(",")]
    db = Path(tempfile.mkdtemp(prefix="dims-regret-")) / "db.sqlite"
    rng = np.random.default_rng(0)
    build = (lambda m: gemm(m, args.k, args.n)) if args.op == "gemm" else softmax_rows
    dynamic = build(dim("m", uppers[-1]))
    constants = [rng.standard_normal(t.shape).astype(np.float32) for t in dynamic.inputs[1:-1]]
    first = rng.standard_normal(dynamic.inputs[0].shape).astype(np.float32)
    bucketed = tg.tune_buckets(dynamic, "m", uppers=uppers, strategy=args.strategy, trials=args.trials * len(uppers),
                               db=db, progress=False)
    rows = []
    for lower, upper in bucketed.ranges:
        for m in sorted({lower, (lower + upper) // 2, upper}):
            static = build(m)
            static_kernel = tg.tune(static, strategy=args.strategy, trials=args.trials, db=db, progress=False).kernel
            dims = dims_array(dynamic.dims, {"m": m})
            # the static kernel's first input: the run-time rows (gemm) or columns (softmax) of the bucket's
            first_m = np.ascontiguousarray(first[:m] if args.op == "gemm" else first[:, :m])
            out_b = np.empty(dynamic.outputs[0].shape, np.float32)
            out_s = np.empty(static.outputs[0].shape, np.float32)
            run_b = bucketed.bind([first, *constants, dims], [out_b], args.threads).run
            run_s = static_kernel.bind([first_m, *constants], [out_s], args.threads).run
            run_b()
            run_s()
            valid = out_b[:m] if args.op == "gemm" else out_b[:, :m]
            np.testing.assert_allclose(valid, out_s, rtol=1e-3, atol=1e-3)
            times: dict[str, list[float]] = {"bucket": [], "static": []}
            measure(run_b, min_time=0.1)  # a discarded round each: the first after tuning ran up to 2x slow
            measure(run_s, min_time=0.1)
            for _ in range(args.rounds):  # alternating rounds: never two things timed at once
                times["bucket"].append(measure(run_b, min_time=0.1, warmup_time=0.05).median)
                times["static"].append(measure(run_s, min_time=0.1, warmup_time=0.05).median)
            med = {key: statistics.median(v) for key, v in times.items()}
            spread = {key: (max(v) - min(v)) / med[key] for key, v in times.items()}
            rows.append({"bucket": f"[{lower}, {upper}]", "m": m, "bucket_us": round(med["bucket"] * 1e6, 1),
                         "static_us": round(med["static"] * 1e6, 1), "regret": round(med["bucket"] / med["static"], 2),
                         "spread_bucket": round(spread["bucket"], 2), "spread_static": round(spread["static"], 2)})
            print(rows[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"dims_regret_{args.op}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    what = f"GEMM m x {args.k} . {args.k} x {args.n}" if args.op == "gemm" else "softmax over 64 rows of length m"
    lines = [f"{what}, {args.strategy} with {args.trials} trials per kernel, "
             f"{args.threads} threads, {args.rounds} alternating rounds (medians; spread = (max - min) / median)", "",
             "| bucket | m | bucket kernel us | static kernel us | regret | spreads |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['bucket']} | {r['m']} | {r['bucket_us']} | {r['static_us']} | {r['regret']}x | "
              f"{r['spread_bucket']} / {r['spread_static']} |" for r in rows]
    (out / f"dims_regret_{args.op}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
