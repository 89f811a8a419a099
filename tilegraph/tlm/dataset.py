"""The TLM dataset, made by tilegraph itself: tune a corpus with the deep search and keep every measurement.

    python -m tilegraph.tlm.dataset --out DIR --time-per-workload 10           # the shipped model's corpus
    python -m tilegraph.tlm.dataset --out DIR --time-per-workload 5 --ops 4 --models none   # a quick one

The corpus (corpus()):
- the op library at random shapes: the families of OPS_ORDER (matmul, dense, batch matmul, 1-D/2-D/3-D,
  depthwise, grouped, dilated, transposed and capsule convolutions, conv+bn+relu, attention's
  transposed batch matmul, norms, softmax, pooling, reductions, elementwise) drawn round-robin, each
  shape drawn from ranges around what models use. A shape that is one of the Ansor suite's
  workloads (tilegraph.workloads) is redrawn, so the suite stays held out for evaluation;
- the layers of the reference models (ResNet-50, MobileNet-V2, BERT-base, GPT-2; tilegraph.graph.zoo,
  exported to ONNX and read by the ONNX frontend): the anchor workloads of their fusion groups,
  as whole-model tuning sees them, up to --layers-per-model each, spread over the model.
Each workload is tuned with strategy "evolutionary" (its sketches only, so every measured program
has a sentence in the tensor language) for --time-per-workload seconds, into DIR/records.db.

Output (DIR): records.db (every measurement, failures included), records.jsonl (one line per
measured program: workload key, source, name, target, sentence, latency in seconds or null for a
failure), corpus.json (the workloads and their keys: what an evaluation must not use), summary.json
(counts and how long it took). Re-running with the same DIR resumes: tuned workloads are skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilegraph import workloads
from tilegraph.errors import TilegraphError
from tilegraph.te.workload import Workload

log = logging.getLogger("tilegraph.tlm")

MODELS = ("resnet50", "mobilenet_v2", "bert", "gpt2")


@dataclass(frozen=True)
class CorpusEntry:
    source: str          # "ops" or a reference model's name
    name: str            # a workload spec ("matmul:96,256,384") or a model task's name
    workload: Workload

    @property
    def key(self) -> str:
        return self.workload.key


def _pick(rng: random.Random, *choices: Any) -> Any:
    return rng.choice(choices)


def _conv_shape(rng: random.Random) -> tuple[int, int, int, int, int]:
    h = _pick(rng, 7, 14, 17, 28, 35, 56)
    ci, co = _pick(rng, 16, 24, 32, 48, 64, 96, 128, 192, 256), _pick(rng, 16, 32, 64, 96, 128, 160, 256)
    k = _pick(rng, 1, 3, 3, 5)
    return h, ci, co, k, _pick(rng, 1, 1, 2)


def _depthwise(rng: random.Random) -> str:
    h, c, k = _pick(rng, 7, 14, 28, 56, 112), _pick(rng, 16, 32, 96, 144, 192, 384), _pick(rng, 3, 3, 5)
    return f"depthwise_conv2d_nhwc:1,{h},{h},{c},{k},{_pick(rng, 1, 2)},{k // 2}"


def _conv1d(rng: random.Random) -> str:
    length, ci, co = _pick(rng, 32, 64, 128, 256), _pick(rng, 32, 64, 128), _pick(rng, 64, 128, 256)
    k = _pick(rng, 1, 3, 5)
    return f"conv1d_nlc:1,{length},{ci},{co},{k},{_pick(rng, 1, 2)},{k // 2}"


# op family -> random spec; shapes around what CNNs and transformers use, kept small enough to tune in seconds
_GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "matmul": lambda r: f"matmul:{_pick(r, 16, 32, 49, 64, 96, 128, 196, 256)},"
                        f"{_pick(r, 64, 96, 128, 192, 256, 384, 512, 768)},{_pick(r, 64, 128, 192, 256, 384, 512, 1024)}",
    "dense": lambda r: f"dense:{_pick(r, 1, 8, 32, 64, 128)},{_pick(r, 128, 256, 512, 768, 1024)},"
                       f"{_pick(r, 64, 128, 256, 512, 1000)}",
    "batch_matmul": lambda r: f"batch_matmul:{_pick(r, 2, 4, 8, 12)},{_pick(r, 32, 64, 128)},{_pick(r, 32, 64, 128)},"
                              f"{_pick(r, 32, 64, 128)}",
    "conv2d_nhwc": lambda r: "conv2d_nhwc:1,{0},{0},{1},{2},{3},{4},{5}".format(*(s := _conv_shape(r)), s[3] // 2),
    "conv2d_grouped": lambda r: "conv2d_nhwc:1,{0},{0},{1},{1},3,1,1,1,{2}".format(
        _pick(r, 7, 14, 28), _pick(r, 32, 64, 128), _pick(r, 2, 4, 8)),
    "conv2d_dilated": lambda r: "conv2d_nhwc:1,{0},{0},{1},{2},3,1,2,2".format(
        _pick(r, 14, 28, 56), _pick(r, 16, 32, 64), _pick(r, 32, 64)),
    "conv2d_nchw": lambda r: "conv2d_nchw:1,{1},{0},{0},{2},{3},{4},{5}".format(*(s := _conv_shape(r)), s[3] // 2),
    "depthwise_conv2d_nhwc": lambda r: _depthwise(r),
    "conv1d_nlc": lambda r: _conv1d(r),
    "conv3d_ndhwc": lambda r: "conv3d_ndhwc:1,{0},{1},{1},{2},{3},3,1,1".format(
        _pick(r, 4, 8), _pick(r, 7, 14), _pick(r, 16, 32), _pick(r, 16, 32, 64)),
    "conv2d_transpose_nhwc": lambda r: "conv2d_transpose_nhwc:1,{0},{0},{1},{2},4,2,1".format(
        _pick(r, 4, 8, 16), _pick(r, 64, 128, 256), _pick(r, 32, 64, 128)),
    "conv2d_capsule_nhwijc": lambda r: "conv2d_capsule_nhwijc:1,{0},{0},{1},{1},3,{2},1".format(
        _pick(r, 8, 16), _pick(r, 8, 16), _pick(r, 1, 2)),
    "conv2d_bn_relu": lambda r: "conv2d_bn_relu:1,{0},{0},{1},{2},{3},{4},{5}".format(*(s := _conv_shape(r)), s[3] // 2),
    "transpose_batch_matmul": lambda r: f"transpose_batch_matmul:1,{_pick(r, 32, 64, 96, 128)},{_pick(r, 4, 8, 12)},"
                                        f"{_pick(r, 32, 64)}",
    "norm_bmn": lambda r: f"norm_bmn:1,{_pick(r, 64, 128, 384, 768)},{_pick(r, 64, 256, 768)}",
    "softmax": lambda r: f"softmax:{_pick(r, 64, 128, 384, 768)},{_pick(r, 128, 384, 1000)}",
    "layer_norm": lambda r: f"layer_norm:{_pick(r, 32, 128, 197)},{_pick(r, 256, 384, 768)}",
    "max_pool2d": lambda r: f"max_pool2d:1,{_pick(r, 28, 56, 112)},{_pick(r, 28, 56, 112)},{_pick(r, 32, 64)},3,2,1",
    "avg_pool2d": lambda r: f"avg_pool2d:1,{_pick(r, 14, 28)},{_pick(r, 14, 28)},{_pick(r, 64, 128)},3,1,1",
    "global_avg_pool2d": lambda r: f"global_avg_pool2d:1,{_pick(r, 7, 14)},{_pick(r, 7, 14)},{_pick(r, 256, 512, 1280)}",
    "sum": lambda r: f"sum:{_pick(r, 64, 256)},{_pick(r, 256, 768, 1000)}",
    "mean": lambda r: f"mean:{_pick(r, 64, 256)},{_pick(r, 256, 768)}",
    "gelu": lambda r: f"gelu:{_pick(r, 64, 128)},{_pick(r, 768, 3072)}",
    "add": lambda r: f"add:{_pick(r, 64, 128)},{_pick(r, 256, 768)}",
}
OPS_ORDER = tuple(_GENERATORS)


def suite_keys() -> set[str]:
    """The Ansor suite's workload keys (batch 1): held out of every corpus."""
    return {workloads.get(w).key for w in workloads.list()}


def random_ops(count: int, seed: int, exclude: set[str]) -> list[CorpusEntry]:
    """`count` op workloads at random shapes, families round-robin; none of them in `exclude`."""
    rng = random.Random(seed)
    out: list[CorpusEntry] = []
    seen = set(exclude)
    attempts = 0
    while len(out) < count and attempts < 50 * count:
        family = OPS_ORDER[attempts % len(OPS_ORDER)]
        attempts += 1
        spec = _GENERATORS[family](rng)
        try:
            wl = workloads.from_spec(spec)
        except TilegraphError:
            continue
        if wl.key in seen:
            continue
        seen.add(wl.key)
        out.append(CorpusEntry("ops", spec, wl))
    return out


def model_layers(model: str, limit: int, exclude: set[str]) -> list[CorpusEntry]:
    """Up to `limit` anchor workloads of a reference model (as whole-model tuning extracts them), spread
    evenly over its tasks; needs torch, transformers and onnx (`pip install 'tilegraph[models]'`)."""
    from tilegraph import config
    from tilegraph.graph import zoo
    from tilegraph.graph.frontends.onnx import from_onnx
    from tilegraph.graph.fusion.partition import partition
    from tilegraph.graph.passes import optimize
    from tilegraph.graph.tuning.tasks import extract_tasks

    path = config.cache_dir() / "models" / f"{model}.onnx"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        log.info("exporting %s to %s", model, path)
        zoo.export_onnx(model, path.with_suffix(".tmp.onnx"))
        path.with_suffix(".tmp.onnx").replace(path)
    graph, _ = optimize(from_onnx(str(path)))
    tasks = [t for t in extract_tasks(graph, partition(graph, fuse=True)) if t.workload.key not in exclude]
    if limit < len(tasks):
        step = len(tasks) / limit
        tasks = [tasks[int(i * step)] for i in range(limit)]
    return [CorpusEntry(model, t.name, t.workload) for t in tasks]


def corpus(ops: int, models: tuple[str, ...], layers_per_model: int, seed: int = 0) -> Iterator[CorpusEntry]:
    """The corpus: random op shapes first, then the models' layers (each workload once, suite held out)."""
    exclude = suite_keys()
    entries = random_ops(ops, seed, exclude)
    yield from entries
    exclude |= {e.key for e in entries}
    for model in models:
        for entry in model_layers(model, layers_per_model, exclude):
            exclude.add(entry.key)
            yield entry


def tune_entry(entry: CorpusEntry, out: Path, seconds: float, target: str, seed: int) -> list[dict[str, Any]]:
    """Tune one workload with the evolutionary search; its measured programs as dataset lines."""
    from tilegraph.tune.database import open_database
    from tilegraph.tune.measure import resolve_target
    from tilegraph.tune.tlm.language import render_trace
    from tilegraph.tune.tune import tune

    db_path = out / "records.db"
    tune(entry.workload, target=target, db=str(db_path), strategy="evolutionary", time_budget=seconds,
            seed=seed, progress=False)
    tgt = resolve_target(target)
    lines = []
    with open_database(str(db_path)) as db:
        for record in db.records(entry.key, str(tgt.fingerprint)):
            tokens = render_trace(entry.workload, tgt, record.trace_json)
            if tokens is None:
                continue
            lines.append({"workload": entry.key, "source": entry.source, "name": entry.name,
                          "target": str(tgt.fingerprint), "sentence": " ".join(tokens),
                          "latency_s": record.latency_s if record.ok else None, "trace_hash": record.trace_hash})
    return lines


def build(out: Path, seconds: float, ops: int, models: tuple[str, ...], layers_per_model: int, seed: int,
          target: str = "cpu") -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    records_path, corpus_path = out / "records.jsonl", out / "corpus.json"
    done: set[str] = set()
    if records_path.exists():
        done = {json.loads(line)["workload"] for line in records_path.read_text().splitlines() if line.strip()}
    listed = json.loads(corpus_path.read_text()) if corpus_path.exists() else []
    start = time.monotonic()
    tuned = 0
    for entry in corpus(ops, models, layers_per_model, seed):
        if entry.key not in {e["key"] for e in listed}:
            listed.append({"key": entry.key, "source": entry.source, "name": entry.name})
            corpus_path.write_text(json.dumps(listed, indent=1) + "\n")
        if entry.key in done:
            continue
        began = time.monotonic()
        try:
            lines = tune_entry(entry, out, seconds, target, seed)
        except TilegraphError as err:  # one workload that cannot be tuned does not stop the corpus
            print(f"skipping {entry.source} {entry.name}: {err}", file=sys.stderr)
            continue
        with records_path.open("a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        done.add(entry.key)
        tuned += 1
        print(f"[{len(done)}/{len(listed)}] {entry.source:12s} {entry.name}: {len(lines)} programs "
              f"in {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
    lines = [json.loads(line) for line in records_path.read_text().splitlines() if line.strip()]
    summary = {"workloads": len({x["workload"] for x in lines}), "programs": len(lines),
               "ok_programs": sum(x["latency_s"] is not None for x in lines),
               "by_source": {s: len({x["workload"] for x in lines if x["source"] == s})
                             for s in sorted({x["source"] for x in lines})},
               "seconds_this_run": round(time.monotonic() - start, 1), "tuned_this_run": tuned,
               "command": " ".join(["python -m tilegraph.tlm.dataset", *sys.argv[1:]]),
               "time_per_workload_s": seconds, "ops": ops, "models": list(models),
               "layers_per_model": layers_per_model, "seed": seed}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilegraph.tlm.dataset", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory for records.db, records.jsonl, corpus.json")
    parser.add_argument("--time-per-workload", type=float, default=10.0, help="seconds of tuning per workload")
    parser.add_argument("--ops", type=int, default=40, help="random-shape op workloads")
    parser.add_argument("--models", default=",".join(MODELS), help="reference models whose layers join ('none')")
    parser.add_argument("--layers-per-model", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", default="cpu")
    args = parser.parse_args(argv)
    models = () if args.models in ("", "none") else tuple(m.strip() for m in args.models.split(","))
    unknown = [m for m in models if m not in MODELS]
    try:
        if unknown:
            raise ValueError(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)} or 'none'")
        if args.time_per_workload <= 0 or args.ops < 0 or args.layers_per_model < 0:
            raise ValueError("--time-per-workload must be > 0, --ops and --layers-per-model >= 0")
        summary = build(Path(args.out), args.time_per_workload, args.ops, models, args.layers_per_model, args.seed,
                        args.target)
    except (TilegraphError, ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
