"""Whole models on a GPU: tilegraph (untuned and tuned) against PyTorch eager on the same device.

    python -m benchmarks.gpu_models                                  # the four reference models, cuda, 60 s tuning each
    python -m benchmarks.gpu_models --models bert,gpt2 --budget 90 --out results/
    python -m benchmarks.gpu_models --target opencl --small --budget 10   # checks the harness on PoCL, no GPU

Per model: the transformers definition (random weights, seed 0) is exported to ONNX (dynamo
exporter); tilegraph compiles it for the target untuned (each kernel's default GPU schedule) and
tuned (time_budget=S into a fresh database: the task scheduler's "auto" slices, Gensor's GPU states
then evolutionary search over the GPU sketches, every candidate built, checked against the float64
reference and timed on the device). A CUDA model replays its launches as one CUDA graph; the tuned
model also runs kernel by kernel (one host launch each), to show what the graph saves. Both are checked
against ONNX Runtime on the CPU (max |out - ref| / max |ref|). PyTorch eager runs the module on the
device in fp32 with TF32 off (the same arithmetic). Every contender is numpy in, numpy out: the
input goes up and the output comes down in each call, for tilegraph and torch alike. Timing:
tilegraph.graph.race (warm-up, alternating rounds, median of per-round medians, spread).
Results: a Markdown table (stdout and --out/gpu_models.md), JSON, and each tuned model's task table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("bert", "gpt2", "resnet50", "mobilenet_v2")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_models", description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--target", default="cuda", help="cuda (torch runs on the GPU) or opencl")
    p.add_argument("--budget", type=float, default=60.0, help="whole-model tuning seconds per model (0: untuned only)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="timing seconds per contender")
    p.add_argument("--small", action="store_true", help="the reduced reference models (checks the harness)")
    p.add_argument("--out", default=None, help="a folder for gpu_models.md, gpu_models.json and the task tables")
    p.add_argument("--db-dir", default=None, help="keep each tuned model's database here (NAME-tuned.db; real GPU "
                   "records for the cost model) instead of a temporary folder")
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")
    return args


def _relative_error(got: dict[str, np.ndarray], expected: list[np.ndarray]) -> float:
    return max(float(np.abs(g - e).max() / max(float(np.abs(e).max()), 1e-30)) for g, e in zip(got.values(), expected))


def _torch_peer(name: str, small: bool, inputs: dict[str, np.ndarray], device: str) -> tuple[Any, Any]:
    """(timed callable, outputs as numpy) of PyTorch eager on `device`, numpy in and out."""
    import torch

    from tilegraph.graph import zoo

    module = zoo.torch_model(name, small=small)[0].to(device).eval()
    arrays = [np.ascontiguousarray(a) for a in inputs.values()]

    def call() -> Any:
        with torch.inference_mode():
            out = module(*(torch.from_numpy(a).to(device) for a in arrays))
            return [o.cpu().numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]

    return call, call


KERNEL_BY_KERNEL = "tilegraph tuned, kernel by kernel"


def _without_graph(model: Any, inputs: dict[str, np.ndarray]) -> Any:
    """The tuned model with one host launch per kernel (what a CUDA graph replay saves)."""
    model.device_graph = False
    try:
        return model.run(inputs)
    finally:
        model.device_graph = True


def run_model(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import onnxruntime as ort

    import tilegraph as tg
    from tilegraph.graph import zoo
    from tilegraph.graph.race import race
    from tilegraph.tune.database import open_database

    row: dict[str, Any] = {"model": name}
    started = time.perf_counter()
    path = zoo.export_onnx(name, workdir / f"{name}.onnx", small=args.small)
    row["export_s"] = time.perf_counter() - started
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    inputs: dict[str, np.ndarray] = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        inputs[i.name] = (rng.integers(0, 1000, shape).astype(np.int64) if "int" in i.type
                          else rng.standard_normal(shape).astype(np.float32))
    expected = session.run(None, inputs)
    contenders: dict[str, Any] = {}

    empty = workdir / f"{name}-untuned.db"
    open_database(str(empty)).close()  # an empty database: every kernel gets its default schedule
    started = time.perf_counter()
    untuned = tg.compile(str(path), target=args.target, db=str(empty))
    row["compile_s"] = time.perf_counter() - started
    row["kernels"] = len(untuned.kernels)
    row["untuned_error"] = _relative_error(untuned.run(inputs), expected)
    contenders["tilegraph"] = lambda: untuned.run(inputs)
    if args.budget > 0:
        started = time.perf_counter()
        db_dir = Path(args.db_dir) if args.db_dir else workdir
        db_dir.mkdir(parents=True, exist_ok=True)
        tuned = tg.compile(str(path), target=args.target, db=str(db_dir / f"{name}-tuned.db"), time_budget=args.budget)
        row["tune_compile_s"] = time.perf_counter() - started
        row["tuned_error"] = _relative_error(tuned.run(inputs), expected)
        row["tasks"] = tuned.tuning.table()
        row["launch_mode"], row["graph_note"] = getattr(tuned, "launch_mode", "-"), getattr(tuned, "graph_note", "")
        contenders["tilegraph tuned"] = lambda: tuned.run(inputs)
        if row["launch_mode"] == "graph":
            contenders[KERNEL_BY_KERNEL] = lambda: _without_graph(tuned, inputs)
    device = "cuda" if args.target == "cuda" else "cpu"
    try:
        call, outputs = _torch_peer(name, args.small, inputs, device)
        row["torch_error"] = _relative_error(dict(enumerate(outputs())), expected)
        contenders[f"torch ({device})"] = call
    except Exception as e:  # the peer is optional: report why it is missing, keep our numbers
        row["torch_missing"] = f"{type(e).__name__}: {e}"
    times = race(contenders, rounds=args.rounds, seconds=args.seconds)
    row["latency_ms"] = {k: v.median_s * 1e3 for k, v in times.items()}
    row["spread"] = {k: v.spread for k, v in times.items()}
    return row


def format_table(rows: list[dict[str, Any]], device: str, args: argparse.Namespace) -> str:
    lines = [f"Whole models on {device} (target {args.target}), batch 1, fp32 (torch: TF32 off); "
             f"median ms of {args.rounds} alternating rounds (spread); numpy in, numpy out; tuning {args.budget:g} s",
             "", "| model | tilegraph | tilegraph tuned | tuned, kernel by kernel | torch eager | torch / tuned "
             "| error untuned | error tuned | kernels | compile s | tune+compile s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(row: dict[str, Any], key: str) -> str:
        ms = row.get("latency_ms", {}).get(key)
        return "-" if ms is None else f"{ms:.3f} ({row['spread'][key]:.0%})"

    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['model']} | failed: {r['failed']} ||||||||||")
            continue
        torch_key = next((k for k in r["latency_ms"] if k.startswith("torch")), None)
        best = r["latency_ms"].get("tilegraph tuned", r["latency_ms"]["tilegraph"])
        ratio = f"{r['latency_ms'][torch_key] / best:.2f}x" if torch_key else "-"
        lines.append(f"| {r['model']} | {cell(r, 'tilegraph')} | {cell(r, 'tilegraph tuned')} | "
                     f"{cell(r, KERNEL_BY_KERNEL)} | "
                     f"{cell(r, torch_key) if torch_key else '-'} | {ratio} | {r['untuned_error']:.1e} | "
                     f"{r.get('tuned_error', float('nan')):.1e} | {r['kernels']} | {r['compile_s']:.1f} | "
                     f"{r.get('tune_compile_s', float('nan')):.1f} |")
    return "\n".join(lines) + "\n"


def device_name(target: str) -> str:
    if target == "cuda":
        try:
            import torch

            return torch.cuda.get_device_name()
        except Exception:  # no torch with CUDA: the table still says which target ran
            return "an unknown CUDA device"
    import tilegraph as tg

    return tg.Target(target).device_name or target


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.target == "cuda":
        try:
            import torch
        except ImportError:
            print("gpu_models: torch with CUDA is needed for --target cuda", file=sys.stderr)
            return 2
        if not torch.cuda.is_available():
            print("gpu_models: no CUDA device", file=sys.stderr)
            return 2
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tg_gpu_models_") as tmp:
        for name in args.models:
            try:
                row = run_model(name, args, Path(tmp))
            except Exception as e:  # one model's failure is reported in its row, the others still run
                traceback.print_exc()
                row = {"model": name, "failed": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "tasks"}), flush=True)
            if "tasks" in row:
                print(row["tasks"], flush=True)
                if out:
                    (out / f"tasks-{name}.md").write_text(row["tasks"] + "\n", encoding="utf-8")
    table = format_table(rows, device_name(args.target), args)
    print(table)
    if out:
        (out / "gpu_models.md").write_text(table, encoding="utf-8")
        (out / "gpu_models.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0 if all("failed" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
