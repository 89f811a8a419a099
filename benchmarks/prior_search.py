"""python -m benchmarks.prior_search: what the cost model's prior buys a search (issue 34, part 3).

    python -m benchmarks.prior_search --workloads GMM-4,C2D-2,DEP-1 --trials 32 [--seeds 0,1]

For each workload of the Ansor suite (held out of every corpus a prior is trained on) and seed, the
evolutionary search runs twice with the same trial budget and seed, each on a fresh database: blind
(TILEGRAPH_COST_MODEL_PRIOR=0, the per-workload model ranking at random until it has measured 16
programs) and from the shipped prior. The two best kernels are then timed against each other in
alternating rounds (the tuning runs' own numbers were taken minutes apart on a shared machine);
reported: each best's median, the ratio blind / prior (above 1: the prior's search found the faster
kernel), and the Spearman correlation of each search's scores with what it measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

import numpy as np


def _search(workload: object, trials: int, seed: int, prior: bool, db: str) -> tuple[object, float | None]:
    from tilegraph.tune.strategy.evolutionary import EvolutionarySearch
    from tilegraph.tune.tune import tune

    os.environ["TILEGRAPH_COST_MODEL_PRIOR"] = "1" if prior else "0"
    strategy = EvolutionarySearch()
    result = tune(workload, db=db, strategy=strategy, trials=trials, seed=seed, progress=False)
    return result, strategy.spearman


def main(argv: list[str] | None = None) -> int:
    from tilegraph import workloads
    from tilegraph.runtime.timer import measure
    from tilegraph.testing import random_inputs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="GMM-4,C2D-2,DEP-1,GRP-4,TBG-1,SFM-1")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    print("| workload | seed | trials | blind ms | prior ms | blind / prior | Spearman blind | Spearman prior |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for wid in args.workloads.split(","):
        wl = workloads.get(wid)
        for seed in (int(s) for s in args.seeds.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                blind, rho_blind = _search(wl, args.trials, seed, False, f"{tmp}/blind.db")
                prior, rho_prior = _search(wl, args.trials, seed, True, f"{tmp}/prior.db")
            inputs = random_inputs(wl, seed)
            times: dict[str, list[float]] = {"blind": [], "prior": []}
            for r in range(args.rounds):
                for name, res in (("blind", blind), ("prior", prior)) if r % 2 == 0 else (("prior", prior), ("blind", blind)):
                    times[name].append(measure(lambda res=res, inputs=inputs: res.kernel(*inputs), min_time=0.2).median)
            b, p = statistics.median(times["blind"]), statistics.median(times["prior"])
            ratios.append(b / p)

            def rho(x: float | None) -> str:
                return "-" if x is None else f"{x:.2f}"

            print(f"| {wid} | {seed} | {args.trials} | {b * 1e3:.3f} | {p * 1e3:.3f} | {b / p:.2f}x | "
                  f"{rho(rho_blind)} | {rho(rho_prior)} |", flush=True)
    print(f"\ngeomean blind / prior: {float(np.exp(np.mean(np.log(ratios)))):.3f}x over {len(ratios)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
