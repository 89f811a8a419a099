"""Train the schedule language model on a dataset from tilegraph.tlm.dataset.

    python -m tilegraph.tlm.train --data DIR --minutes 20 --seed 0            # writes the shipped weights
    python -m tilegraph.tlm.train --data DIR --out my-weights/ --epochs 2     # elsewhere (TLMStrategy(model_dir=))
    python -m tilegraph.tlm.train --data CPU --data GPU --init shipped        # continue from the shipped model

Workloads, not records, are split: HELD_OUT_SHARE of them (chosen by the seed) never reach the
optimizer and give the metrics written beside the weights (tlm.json, docs/tlm.md): the weighted
loss and the top-1 accuracy of the decision values of each held-out workload's best programs
(the model's argmax over the whole vocabulary, the forced innermost factor of a tile left out).
A record's weight is its speed relative to its workload's best, to the power --power (objective.py);
records below MIN_WEIGHT are dropped. AdamW, linear warm-up then cosine decay, batch --batch,
until --epochs or --minutes runs out; the epoch with the lowest held-out loss is kept.

--init continues from a trained model (a directory, or "shipped") instead of random weights: the
way a vocabulary that grew (a new sketch's tokens, language.py) is learnt without losing what the
model knew, given its data mixed with sentences of the old kinds. Its held-out metrics before any
step are epoch 0 of the history, and a fine-tuning that never beats them keeps the start.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import math
import platform
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HELD_OUT_SHARE = 0.1
MIN_WEIGHT = 0.02
BEST_FOR_ACCURACY = 5


def load_records(dirs: list[Path]) -> dict[str, list[tuple[list[str], float]]]:
    """workload key -> [(sentence, latency or inf)] from records.jsonl (or records.jsonl.gz) files."""
    by_workload: dict[str, list[tuple[list[str], float]]] = defaultdict(list)
    for d in dirs:
        path = d / "records.jsonl"
        if not path.exists() and path.with_suffix(".jsonl.gz").exists():  # a dataset kept compressed
            path = path.with_suffix(".jsonl.gz")
        if not path.exists():
            raise FileNotFoundError(f"{path}: no dataset here (make one: python -m tilegraph.tlm.dataset --out {d})")
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                sentence = row["sentence"].split()
                latency = float(row["latency_s"]) if row["latency_s"] is not None else math.inf
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{path}:{n}: not a dataset record ({err})") from None
            by_workload[row["workload"]].append((sentence, latency))
    return dict(by_workload)


def split_workloads(keys: list[str], seed: int) -> tuple[list[str], list[str]]:
    """(train, held out): a seeded hash order, so the split is stable as a dataset grows."""
    ranked = sorted(keys, key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest())
    n_held = max(1, int(round(HELD_OUT_SHARE * len(keys)))) if len(keys) > 1 else 0
    return sorted(ranked[n_held:]), sorted(ranked[:n_held])


def weighted_examples(records: dict[str, list[tuple[list[str], float]]], keys: list[str],
                      power: float) -> list[tuple[list[str], float]]:
    from tilegraph.tune.tlm.objective import relative_weights

    out = []
    for key in keys:
        rows = records[key]
        for (sentence, _), w in zip(rows, relative_weights([lat for _, lat in rows], power)):
            if w >= MIN_WEIGHT:
                out.append((sentence, w))
    return out


def evaluate(net: Any, records: dict[str, list[tuple[list[str], float]]], keys: list[str], power: float,
             batch: int = 64) -> dict[str, float]:
    """Weighted loss over the workloads' records and top-1 accuracy on their best programs' decisions."""
    from tilegraph.tune.tlm.language import decision_mask
    from tilegraph.tune.tlm.network import torch
    from tilegraph.tune.tlm.objective import batch_tensors, weighted_loss

    net.eval()
    examples = weighted_examples(records, keys, power)
    if not examples:
        return {"loss": math.nan, "top1": math.nan, "decisions": 0, "sentences": 0}
    total, weight = 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(examples), batch):
            chunk = examples[i: i + batch]
            ids, mask = batch_tensors([s for s, _ in chunk])
            w = torch.tensor([x for _, x in chunk])
            total += float(weighted_loss(net, ids, mask, w)) * float(w.sum())
            weight += float(w.sum())
        best = [s for key in keys for s, lat in sorted(records[key], key=lambda r: r[1])[:BEST_FOR_ACCURACY]
                if math.isfinite(lat)]
        right = counted = 0
        for i in range(0, len(best), batch):
            chunk = best[i: i + batch]
            ids, _ = batch_tensors(chunk)
            pred = net(ids[:, :-1]).argmax(-1)
            for row, sentence in enumerate(chunk):
                for pos, free in enumerate(decision_mask(sentence, free_only=True)):
                    if free and pos > 0:
                        counted += 1
                        right += int(pred[row, pos - 1] == ids[row, pos])
    return {"loss": round(total / weight, 4), "top1": round(right / max(counted, 1), 4), "decisions": counted,
            "sentences": len(examples)}


def train(records: dict[str, list[tuple[list[str], float]]], seed: int, minutes: float, epochs: int, batch: int,
          lr: float, power: float, log: Any = print, init: Any = None) -> tuple[Any, dict[str, Any]]:
    """(network, metrics) trained on the records; `init` a ScheduleLM to continue from (else random weights)."""
    from tilegraph.tune.tlm.network import torch

    with torch.enable_grad():  # whatever grad mode the process was left in (a torch peer turns it off)
        return _train(records, seed, minutes, epochs, batch, lr, power, log, init)


def _train(records: dict[str, list[tuple[list[str], float]]], seed: int, minutes: float, epochs: int, batch: int,
           lr: float, power: float, log: Any, init: Any) -> tuple[Any, dict[str, Any]]:
    from tilegraph.tune.tlm.network import ModelConfig, ScheduleLM, torch
    from tilegraph.tune.tlm.objective import batch_tensors, weighted_loss

    torch.manual_seed(seed)
    rng = random.Random(seed)
    train_keys, held_keys = split_workloads(sorted(records), seed)
    examples = weighted_examples(records, train_keys, power)
    if not examples:
        raise ValueError("the dataset has no measured program to learn from")
    net = init if init is not None else ScheduleLM(ModelConfig())
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.01)
    steps_per_epoch = max(1, math.ceil(len(examples) / batch))
    total_steps = steps_per_epoch * epochs
    warmup = min(100, total_steps // 10 + 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5
                                                 * (1 + math.cos(math.pi * min(1.0, s / max(1, total_steps)))))
    start = time.monotonic()
    best: tuple[float, Any, dict[str, Any]] | None = None
    history = []
    if init is not None:  # the start is a candidate: fine-tuning must beat it on the held-out workloads
        held = evaluate(net, records, held_keys, power)
        row = {"epoch": 0, "train_loss": None, "held_out": held, "minutes": 0.0}
        history.append(row)
        log(json.dumps(row))
        best = (held["loss"] if math.isfinite(held["loss"]) else math.inf, copy.deepcopy(net.state_dict()), row)
    step = 0
    for epoch in range(epochs):
        net.train()
        rng.shuffle(examples)
        running = 0.0
        for i in range(0, len(examples), batch):
            chunk = examples[i: i + batch]
            ids, mask = batch_tensors([s for s, _ in chunk])
            loss = weighted_loss(net, ids, mask, torch.tensor([w for _, w in chunk]))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            schedule.step()
            step += 1
            running += loss.item()
        held = evaluate(net, records, held_keys, power)
        row = {"epoch": epoch + 1, "train_loss": round(running / steps_per_epoch, 4), "held_out": held,
               "minutes": round((time.monotonic() - start) / 60, 2)}
        history.append(row)
        log(json.dumps(row))
        if best is None or (math.isfinite(held["loss"]) and held["loss"] < best[0]) or not held_keys:
            best = (held["loss"] if math.isfinite(held["loss"]) else math.inf, copy.deepcopy(net.state_dict()), row)
        if time.monotonic() - start > minutes * 60:
            log(f"stopping after epoch {epoch + 1}: the {minutes}-minute budget is spent")
            break
    assert best is not None
    net.load_state_dict(best[1])
    train_metrics = evaluate(net, records, train_keys, power)
    info = {"epochs_run": len(history), "best_epoch": best[2]["epoch"], "steps": step,
            "train_minutes": round((time.monotonic() - start) / 60, 2), "history": history,
            "held_out": best[2]["held_out"], "train": train_metrics,
            "train_workloads": len(train_keys), "held_out_workloads": held_keys,
            "train_sentences": len(examples)}
    return net.eval(), info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilegraph.tlm.train", description=__doc__.split("\n")[0])
    parser.add_argument("--data", action="append", required=True, help="a dataset directory (repeatable)")
    parser.add_argument("--out", default=None, help="where to write tlm.pt + tlm.json (default: the shipped weights)")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--power", type=float, default=3.0, help="weight = (best / latency) ** power")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--init", default=None, help="continue from this model directory ('shipped': the shipped one)")
    args = parser.parse_args(argv)
    try:
        from tilegraph.tune.tlm.network import torch
        from tilegraph.tune.tlm.weights import WEIGHTS_DIR, load_model, read_meta, save_model

        if args.threads:
            torch.set_num_threads(args.threads)
        records = load_records([Path(d) for d in args.data])
        init, init_meta = None, None
        if args.init:
            init_dir = WEIGHTS_DIR if args.init == "shipped" else Path(args.init)
            init_meta = read_meta(init_dir)
            init = load_model(init_dir)[0].train()
        net, info = train(records, args.seed, args.minutes, args.epochs, args.batch, args.lr, args.power,
                          log=lambda s: print(s, file=sys.stderr, flush=True), init=init)
        summaries = []
        for d in args.data:
            path = Path(d) / "summary.json"
            summaries.append(json.loads(path.read_text()) if path.exists() else {"dir": d})
        meta = {"trained": {"command": " ".join(["python -m tilegraph.tlm.train", *(argv or sys.argv[1:])]),
                            "seed": args.seed, "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
                            "lr": args.lr, "batch": args.batch, "power": args.power, "min_weight": MIN_WEIGHT},
                "dataset": {"workloads": len(records), "programs": sum(len(v) for v in records.values()),
                            "summaries": summaries},
                "metrics": info}
        if init_meta is not None:  # what it continued from, so the whole lineage stays on record
            meta["init"] = {k: init_meta.get(k) for k in ("language_version", "vocabulary", "trained", "dataset",
                                                          "init")}
            meta["init"]["held_out"] = init_meta.get("metrics", {}).get("held_out")
        out = save_model(net, meta, Path(args.out) if args.out else WEIGHTS_DIR)
    except (ValueError, FileNotFoundError, ImportError) as err:  # LanguageError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"out": str(out), "held_out": info["held_out"], "train": info["train"],
                      "epochs": info["epochs_run"], "minutes": info["train_minutes"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
