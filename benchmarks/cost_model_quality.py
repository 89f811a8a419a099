"""python -m benchmarks.cost_model_quality: how well the learned cost model ranks held-out measurements.

    python -m benchmarks.cost_model_quality --db tuning.db --workloads GMM-4,C2D-2 [--train 64]

For each workload, its records in the database (in the order they were measured, or shuffled with
--shuffle) are split: the first --train measurements train a fresh GBTCostModel (per-store features of each recorded trace,
replayed), and the remaining "ok" measurements are held out. Reported: Spearman's rank correlation
between the model's scores and the measured speeds (1 / latency) on the held-out records, the
pairwise accuracy (the share of held-out pairs ordered correctly), and whether the model's top
pick among the held-out programs is within 5% of their best.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random

import numpy as np
from scipy.stats import spearmanr


def evaluate(db_path: str, wid: str, train: int, shuffle: bool = False) -> dict[str, float | int | str]:
    from tilegraph import workloads
    from tilegraph.tune.cost_model.features import program_features
    from tilegraph.tune.cost_model.gbt import GBTCostModel
    from tilegraph.tune.database import open_database
    from tilegraph.tune.space.program import recognise

    wl = workloads.get(wid)
    records = sorted(open_database(db_path).records(wl.key), key=lambda r: r.created)
    if shuffle:  # a random split: the held-out programs come from the same distribution as the training ones
        random.Random(0).shuffle(records)
    feats, costs = [], []
    for r in records:
        prog = recognise(wl, r.trace_json)
        if prog is None:
            continue
        feats.append(program_features(prog.func))
        costs.append(r.latency_s if r.ok and r.latency_s else math.inf)
    model = GBTCostModel()
    model.update(feats[:train], costs[:train], wl.key)
    held = [(f, c) for f, c in zip(feats[train:], costs[train:]) if math.isfinite(c)]
    if len(held) < 3 or not model.trained:
        return {"workload": wid, "train": min(train, len(feats)), "held_out": len(held), "spearman": math.nan}
    scores = model.predict([f for f, _ in held])
    speeds = [1.0 / c for _, c in held]
    pairs = [(i, j) for i, j in itertools.combinations(range(len(held)), 2) if speeds[i] != speeds[j]]
    pairwise = sum((scores[i] - scores[j]) * (speeds[i] - speeds[j]) > 0 for i, j in pairs) / max(1, len(pairs))
    top = speeds[int(np.argmax(scores))] / max(speeds)
    return {"workload": wid, "train": train, "held_out": len(held), "spearman": float(spearmanr(scores, speeds).statistic),
            "pairwise": float(pairwise), "top_pick_vs_best": float(top)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="a database (one per workload: use {wid} in the path)")
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--train", type=int, default=64)
    ap.add_argument("--shuffle", action="store_true", help="train on a random --train of the records, not the first")
    args = ap.parse_args(argv)
    print("| workload | trained on | held out | Spearman | pairwise accuracy | top pick / best |")
    print("|---|---|---|---|---|---|")
    for wid in args.workloads.split(","):
        r = evaluate(args.db.format(wid=wid), wid, args.train, args.shuffle)
        print(f"| {r['workload']} | {r['train']} | {r['held_out']} | {r['spearman']:.3f} | {r.get('pairwise', math.nan):.3f} "
              f"| {r.get('top_pick_vs_best', math.nan):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
