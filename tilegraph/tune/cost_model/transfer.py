"""A cost model that transfers: LightGBM trained on the measured programs of many workloads, shipped
with the package as a prior, and fine-tuned on top of it during a run.

    groups = corpus_groups(["/data/corpus"], target)   # replay every record of a corpus (tilegraph.tlm.dataset)
    booster = train_prior(groups)                      # one model over all of them
    save_prior(booster, meta)                          # tilegraph/tune/cost_model/weights/<feature set>.txt + .json
    prior = load_prior(PER_STORE_FEATURES)             # the shipped one (None: none for these features)
    model = GBTCostModel(prior=prior)                  # ranks with the prior before any measurement
    table = evaluate(groups, folds=4, shots=(0, 32))   # Spearman on held-out workloads

    python -m tilegraph.tune.cost_model.transfer train DIR [DIR ...]      # writes the shipped prior
    python -m tilegraph.tune.cost_model.transfer evaluate DIR [DIR ...]   # the held-out table

Why: a per-workload model starts blind, ranking at random until it has measured 16 programs (the
first evolution of every task). The features are per store and workload-independent (operation
counts, loop annotations, access patterns: features.py) and the labels are normalised per workload
(best / cost), so one model learns from every workload's measurements which program structures
are fast. Fine-tuning continues boosting from the prior's scores (LightGBM's init_model): the
workload's own measurements correct the prior where it is wrong for this workload.

A prior is tied to the feature set's version (a column that changed meaning would be read wrong):
`load_prior` returns None for a file of another version, and a file that does not load is refused
with one line naming it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.errors import TilegraphError
from tilegraph.tune.cost_model.base import FeatureSet

log = logging.getLogger(__name__)

WEIGHTS_DIR = Path(__file__).parent / "weights"
PRIOR_ROUNDS = 300
PRIOR_PARAMS = {"learning_rate": 0.1, "num_leaves": 31, "max_depth": 8, "min_data_in_leaf": 8}
MIN_PROGRAMS = 8  # a workload with fewer measured programs teaches no ranking


class PriorError(TilegraphError):
    """A prior's file exists but cannot be read as one."""


@dataclass(frozen=True)
class WorkloadPrograms:
    """The measured programs of one workload on one machine: feature matrices and seconds (inf: failed)."""

    key: str  # the workload's key @ the machine's fingerprint
    name: str
    op: str
    feats: list[np.ndarray]
    costs: list[float]

    @property
    def ok(self) -> int:
        return sum(math.isfinite(c) for c in self.costs)


def corpus_groups(directories: Sequence[str | Path], target: Any = "cpu",
                  feature_set: FeatureSet | None = None) -> list[WorkloadPrograms]:
    """Every measured program of the corpora (tilegraph.tlm.dataset's DIR: corpus.json names each
    workload, records.db holds its records), replayed on its workload and featurised: one group per
    workload and machine of the target's kind (labels are normalised within a group: the same
    program runs at another speed elsewhere); records of other kinds of target and traces that no
    longer replay are left out."""
    from tilegraph import workloads
    from tilegraph.schedule.schedule import Schedule
    from tilegraph.tune.cost_model import feature_set_for
    from tilegraph.tune.database import open_database
    from tilegraph.tune.measure import resolve_target

    tgt = resolve_target(target)
    features = feature_set or feature_set_for(tgt)
    kind = str(tgt.fingerprint).split("-")[0]
    groups: list[WorkloadPrograms] = []
    for directory in directories:
        d = Path(directory)
        try:
            listed = json.loads((d / "corpus.json").read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise TilegraphError(f"{d} is not a corpus directory (corpus.json: {err})") from None
        with open_database(str(d / "records.db"), readonly=True) as db:  # DatabaseError: absent or broken
            for entry in listed:
                if entry.get("source") != "ops":
                    continue  # a model's task is named, not specified: its workload is not rebuilt here
                try:
                    workload = workloads.from_spec(entry["name"])
                except TilegraphError:
                    continue
                by_machine: dict[str, tuple[list[np.ndarray], list[float]]] = {}
                for record in db.records(workload.key):
                    if record.target_fingerprint.split("-")[0] != kind:
                        continue
                    try:
                        func = Schedule.replay(workload, record.trace_json).func
                    except TilegraphError:
                        continue
                    feats, costs = by_machine.setdefault(record.target_fingerprint, ([], []))
                    feats.append(features.extract(func))
                    costs.append(record.latency_s if record.ok and record.latency_s else math.inf)
                for fingerprint, (feats, costs) in sorted(by_machine.items()):
                    group = WorkloadPrograms(f"{workload.key}@{fingerprint}", entry["name"], workload.op_name,
                                             feats, costs)
                    if group.ok >= MIN_PROGRAMS:
                        groups.append(group)
    return groups


def _model(feature_set: FeatureSet, prior: Any = None, rounds: int | None = None, params: dict | None = None,
           warmup: int | None = 1) -> Any:
    from tilegraph.tune.cost_model.gbt import GBTCostModel

    return GBTCostModel(warmup=warmup, rounds=rounds, feature_set=feature_set, prior=prior, params=params)


def train_prior(groups: Sequence[WorkloadPrograms], feature_set: FeatureSet | None = None,
                rounds: int = PRIOR_ROUNDS) -> Any:
    """One LightGBM booster over every group's programs (labels normalised per workload)."""
    from tilegraph.tune.cost_model.features import PER_STORE_FEATURES

    model = _model(feature_set or PER_STORE_FEATURES, rounds=rounds, params=PRIOR_PARAMS)
    for g in groups:
        model.add(g.feats, g.costs, g.key)
    model.update([], [], "")
    if not model.trained:
        raise TilegraphError(f"no prior could be trained on {len(groups)} workloads")
    return model.booster


def spearman(scores: Sequence[float], costs: Sequence[float]) -> float:
    """Rank correlation of scores (higher = faster) with speed (1 / cost); nan for fewer than 3
    programs, 0 where the scores are all equal (they rank nothing)."""
    if len(scores) < 3:
        return float("nan")
    from scipy.stats import spearmanr

    rho = spearmanr(np.asarray(scores, float), -np.asarray(costs, float)).statistic
    return float(rho) if np.isfinite(rho) else 0.0


def evaluate(groups: Sequence[WorkloadPrograms], folds: int = 4, shots: Sequence[int] = (0, 32), seed: int = 0,
             feature_set: FeatureSet | None = None) -> list[dict[str, Any]]:
    """Leave-workloads-out: the workloads split into `folds`; for each held-out workload, with a prior
    trained on the other folds, at each number of shots n: n of its measured programs drawn at
    random, the rest (at least 8) ranked by (scratch) a model trained on the n alone, as a
    tuning run does today (random scores below 16), (prior) the prior alone, (tuned) the prior
    fine-tuned on the n. One row per (workload, n) with the three Spearman correlations."""
    from tilegraph.tune.cost_model.features import PER_STORE_FEATURES

    features = feature_set or PER_STORE_FEATURES
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    rows: list[dict[str, Any]] = []
    for fold in range(folds):
        held = [groups[i] for i in order[fold::folds]]
        prior = train_prior([groups[i] for i in order if i not in order[fold::folds]], features)
        for g in held:
            ok = [i for i, c in enumerate(g.costs) if math.isfinite(c)]
            for n in shots:
                if len(ok) - n < MIN_PROGRAMS:
                    continue
                rng = random.Random(f"{seed}:{g.key}:{n}")
                shown = set(rng.sample(ok, n))
                test = [i for i in ok if i not in shown]
                feats, costs = [g.feats[i] for i in test], [g.costs[i] for i in test]
                train_f, train_c = [g.feats[i] for i in sorted(shown)], [g.costs[i] for i in sorted(shown)]
                scratch = _model(features, warmup=None)  # a tuning run's own model: random below its warm-up
                scratch.update(train_f, train_c, g.key)
                tuned = _model(features, prior=prior)
                tuned.update(train_f, train_c, g.key)
                alone = _model(features, prior=prior)
                pred_scratch = scratch.predict(feats)
                rows.append({
                    "workload": g.name, "op": g.op, "shots": n, "test": len(test),
                    "scratch": (spearman(pred_scratch, costs) if pred_scratch is not None
                                else spearman([rng.random() for _ in feats], costs)),
                    "prior": spearman(alone.predict(feats), costs),
                    "tuned": spearman(tuned.predict(feats), costs),
                })
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table: mean Spearman per number of shots, then per op family."""
    out = ["| shots | workloads | scratch | prior | prior fine-tuned |", "|---|---|---|---|---|"]
    for n in sorted({r["shots"] for r in rows}):
        sel = [r for r in rows if r["shots"] == n]
        out.append(f"| {n} | {len(sel)} | " + " | ".join(f"{np.nanmean([r[k] for r in sel]):.3f}"
                                                        for k in ("scratch", "prior", "tuned")) + " |")
    out += ["", "| op | shots | workloads | scratch | prior | prior fine-tuned |", "|---|---|---|---|---|---|"]
    for op in sorted({r["op"] for r in rows}):
        for n in sorted({r["shots"] for r in rows}):
            sel = [r for r in rows if r["op"] == op and r["shots"] == n]
            if sel:
                out.append(f"| {op} | {n} | {len(sel)} | " + " | ".join(
                    f"{np.nanmean([r[k] for r in sel]):.3f}" for k in ("scratch", "prior", "tuned")) + " |")
    return "\n".join(out)


def _means(rows: Sequence[dict[str, Any]], folds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"folds": folds}
    for n in sorted({r["shots"] for r in rows}):
        sel = [r for r in rows if r["shots"] == n]
        out[str(n)] = {"workloads": len(sel), **{k: round(float(np.nanmean([r[k] for r in sel])), 3)
                                                  for k in ("scratch", "prior", "tuned")}}
    return out


def prior_paths(feature_set: FeatureSet, directory: str | Path = WEIGHTS_DIR) -> tuple[Path, Path]:
    """(the booster's text file, its description) for a feature set."""
    return Path(directory) / f"{feature_set.name}.txt", Path(directory) / f"{feature_set.name}.json"


def save_prior(booster: Any, meta: dict[str, Any], feature_set: FeatureSet,
               directory: str | Path = WEIGHTS_DIR) -> Path:
    model_path, meta_path = prior_paths(feature_set, directory)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(model_path))
    meta_path.write_text(json.dumps({"feature_set": feature_set.name, "feature_version": feature_set.version,
                                     **meta}, indent=2, sort_keys=True) + "\n")
    return model_path


_loaded: dict[tuple[str, str], Any] = {}


def load_prior(feature_set: FeatureSet, directory: str | Path = WEIGHTS_DIR) -> Any:
    """The prior trained for `feature_set` (a LightGBM Booster), or None where there is none for
    its version; PriorError for a file that is there but does not load."""
    model_path, meta_path = prior_paths(feature_set, directory)
    cache_key = (str(model_path), feature_set.version)
    if cache_key in _loaded:
        return _loaded[cache_key]
    if not model_path.exists() or not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PriorError(f"{meta_path} is not a cost-model prior's description ({err})") from None
    if not isinstance(meta, dict) or meta.get("feature_version") != feature_set.version:
        log.info("cost model: the prior at %s is for features %s, not %s; not used", model_path,
                 meta.get("feature_version") if isinstance(meta, dict) else None, feature_set.version)
        return None
    import lightgbm as lgb

    try:
        booster = lgb.Booster(model_file=str(model_path))
    except (lgb.basic.LightGBMError, OSError, ValueError) as err:
        raise PriorError(f"{model_path} is not a LightGBM model ({str(err)[:120]})") from None
    if booster.num_feature() != feature_set.width:
        raise PriorError(f"{model_path} reads {booster.num_feature()} features; {feature_set.name} has "
                         f"{feature_set.width}")
    _loaded[cache_key] = booster
    return booster


def _folds(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"--folds takes a whole number of 2 or more; got {text!r}")
    return int(text)


def _shots(text: str) -> list[int]:
    try:
        shots = [int(s) for s in text.split(",")]
    except ValueError:
        shots = []
    if not shots or any(n < 0 for n in shots):
        raise argparse.ArgumentTypeError(f"--shots takes comma-separated counts of 0 or more, like 0,16,32; got {text!r}")
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilegraph.tune.cost_model.transfer",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("train", "evaluate"))
    parser.add_argument("corpora", nargs="+", help="corpus directories (python -m tilegraph.tlm.dataset --out DIR)")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--out", default=str(WEIGHTS_DIR), help="train: where the prior is written")
    parser.add_argument("--folds", type=_folds, default=4, help="held-out folds of workloads (2 or more)")
    parser.add_argument("--shots", default="0,32", type=_shots,
                        help="comma-separated numbers of a held-out workload's programs shown to the models")
    parser.add_argument("--json", help="evaluate: the rows as JSON, to this file")
    args = parser.parse_args(argv)
    from tilegraph.tune.cost_model import feature_set_for
    from tilegraph.tune.measure import resolve_target

    try:
        features = feature_set_for(resolve_target(args.target))
        groups = corpus_groups(args.corpora, args.target, features)
        programs = sum(len(g.feats) for g in groups)
        print(f"{len(groups)} workloads, {programs} programs", file=sys.stderr)
        shots = args.shots
        if args.command == "train":
            rows = evaluate(groups, args.folds, shots, feature_set=features)  # recorded with the prior
            booster = train_prior(groups, features)
            path = save_prior(booster, {
                "command": " ".join(["python -m tilegraph.tune.cost_model.transfer", *(argv or sys.argv[1:])]),
                "workloads": len(groups), "programs": programs, "rounds": PRIOR_ROUNDS, "params": PRIOR_PARAMS,
                "ops": sorted({g.op for g in groups}), "measured_on": sorted({g.key.split("@")[-1] for g in groups}),
                "held_out_spearman": _means(rows, args.folds)}, features, args.out)
            print(summarize(rows))
            print(f"prior written to {path}")
        else:
            rows = evaluate(groups, args.folds, shots, feature_set=features)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
            print(summarize(rows))
    except TilegraphError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
