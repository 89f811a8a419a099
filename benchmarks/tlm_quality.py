"""python -m benchmarks.tlm_quality: the language model's programs against random sampling and evolutionary search.

    python -m benchmarks.tlm_quality --dataset DIR --workloads GMM-1,C1D-1,C2D-3,DEP-3,TBG-2,SFM-2 \
        --trials 32 --long GMM-1,C2D-3,DEP-3,TBG-2 --long-trials 1000 --long-time 300 --threads 2

Held out: every workload must be absent from the dataset the shipped model was trained on
(DIR/corpus.json, the corpus's keys; the corpus generator also redraws any shape of the Ansor
suite, which these ids come from): the run refuses otherwise.
Per workload, each system tunes from a fresh database at --threads, seed 0:
  tlm            strategy "tlm", --trials measurements
  evolutionary   strategy "evolutionary", --trials measurements
  sketch-random  uniform samples of the same design space (the sketches' decisions drawn at random)
  random         strategy "random" (its own simple split/reorder family)
and, for the --long workloads, evolutionary with --long-trials measurements or --long-time seconds,
whichever ends first (TLM's claim: its quality at a fraction of the compile time).
Then every system's best kernel is checked against the float64 reference and timed in --rounds
alternating rounds, bound to its arrays (runtime.timer.measure; median of round medians).
Writes tlm_quality.md / .csv / .json to --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def _sketch_random():
    from tilegraph.errors import ScheduleError
    from tilegraph.schedule.trace import trace_hash
    from tilegraph.tune.space.program import sample
    from tilegraph.tune.space.sketch import sketches_for
    from tilegraph.tune.strategy.base import Candidate, SearchStrategy

    class SketchRandom(SearchStrategy):
        """Uniform random programs of the workload's sketches (the design space tlm and evolutionary search)."""

        name = "sketch-random"

        def __init__(self) -> None:
            self.rng: random.Random | None = None
            self.seen: set[str] = set()
            self.fruitless = 0

        def propose(self, ctx, n):  # noqa: ANN001, ANN201
            self.rng = self.rng or random.Random(ctx.seed)
            sketches = sketches_for(ctx.workload)
            out = []
            while len(out) < n and self.fruitless < 200:
                try:
                    p = sample(ctx.workload, self.rng.choice(sketches), self.rng)
                except ScheduleError:
                    self.fruitless += 1
                    continue
                h = trace_hash(p.trace_json)
                if h in self.seen or h in ctx.measured:
                    self.fruitless += 1
                    continue
                self.seen.add(h)
                out.append(Candidate(p.trace_json, None, {"strategy": self.name}))
            return out

        def done(self) -> bool:
            return self.fruitless >= 200

    return SketchRandom()


def _tlm_logprob():
    """An ablation: before the cost model is trained, rank the written programs by log-probability."""
    from tilegraph.tune.strategy.tlm import TLMStrategy

    return TLMStrategy(untrained_order="logprob")


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", required=True,
                    help="a dataset directory the shipped model was trained on (repeatable)")
    ap.add_argument("--target", default="cpu", help='e.g. "cpu -isa=avx2" (an AVX2 machine on an AVX-512 host)')
    ap.add_argument("--workloads", default="GMM-1,C1D-1,C2D-3,DEP-3,TBG-2,SFM-2")
    ap.add_argument("--systems", default="tlm,evolutionary,sketch-random,random")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--long", default="GMM-1,C2D-3,DEP-3,TBG-2", help="workloads for the long evolutionary run")
    ap.add_argument("--long-trials", type=int, default=1000)
    ap.add_argument("--long-time", type=float, default=300.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}-tlm")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import tilegraph as tg
    from tilegraph import workloads
    from tilegraph.runtime.host_memory import aligned_copy
    from tilegraph.runtime.timer import measure
    from tilegraph.testing import random_inputs, reference_outputs
    from tilegraph.tune.tlm.weights import read_meta

    trained_on = {e["key"] for d in args.dataset for e in json.loads((Path(d) / "corpus.json").read_text())}
    ids = [w for w in args.workloads.split(",") if w]
    long_ids = [w for w in args.long.split(",") if w]
    for wid in dict.fromkeys(ids + long_ids):
        if workloads.get(wid).key in trained_on:
            raise SystemExit(f"{wid} is in the training corpus ({args.dataset}): not held out")
    meta = read_meta()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tilegraph-tlm-"))
    rows = []
    for wid in dict.fromkeys(ids + long_ids):
        wl = workloads.get(wid)
        results = {}
        plan = [(s, args.trials, None) for s in args.systems.split(",")] if wid in ids else []
        if wid in long_ids:
            plan.append(("evolutionary-long", args.long_trials, args.long_time))
        for system, trials, seconds in plan:
            strategy = {"sketch-random": _sketch_random, "evolutionary-long": lambda: "evolutionary",
                        "tlm-logprob": _tlm_logprob}.get(system, lambda s=system: s)()
            r = tg.tune(wl, target=args.target, strategy=strategy, trials=trials, time_budget=seconds, seed=args.seed,
                        db=str(work / f"{wid}-{system}.db"), num_threads=args.threads, progress=False)
            results[system] = r
            print(f"{wid} {system}: {r.measured} measured in {r.tuning_time_s:.1f} s, best {r.latency_s * 1e6:.1f} us",
                  flush=True)
        inputs = random_inputs(wl, seed=7)
        refs = reference_outputs(wl, inputs)
        for name, r in results.items():
            got = r.kernel(*inputs, num_threads=args.threads)
            got = got if isinstance(got, (tuple, list)) else (got,)
            for x, ref in zip(got, refs):
                np.testing.assert_allclose(x, ref, rtol=1e-3, atol=1e-3, err_msg=f"{wid} {name}")
        launches = {name: r.kernel.bind([aligned_copy(x) for x in inputs], r.kernel.output_arrays(None),
                                        args.threads) for name, r in results.items()}
        samples: dict[str, list[float]] = {name: [] for name in results}
        for _ in range(args.rounds):
            for name in results:
                samples[name].append(measure(launches[name].run, warmup=1, min_time=0.1).median)
        for name, r in results.items():
            med = statistics.median(samples[name])
            rows.append({"workload": wid, "system": name, "measured": r.measured, "tuning_s": round(r.tuning_time_s, 2),
                         "latency_us": round(med * 1e6, 3),
                         "spread": round((max(samples[name]) - min(samples[name])) / med, 4)})
        print(json.dumps([row for row in rows if row["workload"] == wid]), flush=True)
        _write(out, rows, args, meta, quiet=True)  # a run cut short keeps what it measured
    _write(out, rows, args, meta)
    return 0


def _write(out: Path, rows: list[dict], args: argparse.Namespace, meta: dict, quiet: bool = False) -> None:
    with (out / "tlm_quality.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    by = {(r["workload"], r["system"]): r for r in rows}
    wids = list(dict.fromkeys(r["workload"] for r in rows))

    def ratio(a: str, b: str, wid: str) -> float:  # latency of a / latency of b: > 1 means b is faster
        ra, rb = by.get((wid, a)), by.get((wid, b))
        return ra["latency_us"] / rb["latency_us"] if ra and rb else math.nan

    lines = [f"# tlm vs random sampling and evolutionary search ({time.strftime('%Y-%m-%d')})", "",
             f"Model: {meta.get('parameters')} parameters, trained by `{meta['trained']['command']}`; "
             f"target `{args.target}`, threads {args.threads}, {args.trials} measurements, "
             f"latency = median of {args.rounds} alternating rounds.",
             "", "| workload | system | measured | tuning s | latency us | spread |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['workload']} | {r['system']} | {r['measured']} | {r['tuning_s']} | {r['latency_us']} | {r['spread']} |"
              for r in rows]
    others = [o for o in ("sketch-random", "random", "evolutionary", "tlm-logprob", "evolutionary-long")
              if any((w, o) in by for w in wids)]
    lines += ["", "Per workload, latency of the other / latency of tlm (> 1: tlm's kernel is faster):", "",
              "| workload | " + " | ".join(others) + " |", "|---" * (len(others) + 1) + "|"]
    lines += [f"| {w} | " + " | ".join(f"{ratio(o, 'tlm', w):.3f}" for o in others) + " |" for w in wids]
    summary = {}
    for other in ("sketch-random", "random", "evolutionary", "tlm-logprob"):
        xs = [ratio(other, "tlm", w) for w in wids]
        if any(x == x for x in xs):
            summary[f"{other}/tlm"] = round(_geomean(xs), 3)
    long_q = [ratio("evolutionary-long", "tlm", w) for w in wids]
    long_t = [by[(w, "evolutionary-long")]["tuning_s"] / by[(w, "tlm")]["tuning_s"]
              for w in wids if (w, "evolutionary-long") in by and (w, "tlm") in by]
    if long_t:
        summary["evolutionary-long/tlm latency"] = round(_geomean(long_q), 3)
        summary["evolutionary-long/tlm tuning time"] = round(_geomean(long_t), 2)
    lines += ["", "Geometric means (latency of the other / latency of tlm: > 1 means tlm's kernel is faster):", ""]
    lines += [f"- {k}: {v}" for k, v in summary.items()]
    (out / "tlm_quality.md").write_text("\n".join(lines) + "\n")
    (out / "tlm_quality.json").write_text(json.dumps({"rows": rows, "summary": summary, "args": vars(args)}, indent=1))
    if not quiet:
        print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
