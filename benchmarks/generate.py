"""python -m benchmarks.run generate: GPT-2 greedy generation with a KV cache, tokens per second
for prefill and decode, against ONNX Runtime on the same ONNX files, eager PyTorch and
torch.compile(dynamic=True) on the same module.

    python -m benchmarks.run generate [--prompt-len 32] [--new-tokens 64] [--budget 300] \\
        [--threads 2] [--rounds 5] [--exporter dynamo] [--small] [--db PATH] [--any-prompt] [--out DIR]

The decoder (graph/zoo.decoder_model, random weights, seed 0) is exported as its prefill/decode
pair (zoo.export_decoder). tilegraph compiles both once for every length up to prompt + new tokens
(graph/generate.compile_decoder, `--budget` seconds of tuning in all, half each, weighed to the
buckets of --prompt-len as `tilegraph generate` does, or every length alike with --any-prompt; 0:
Gensor's constructed kernels); ONNX Runtime runs the same two files; PyTorch runs the module the files were
exported from, eagerly and under torch.compile(dynamic=True). Every system generates the same
prompt greedily: one warm-up generation each (torch.compile compiles there), then --rounds rounds,
each running every system's whole generation once, one system at a time, SETTLE_S apart. Per system: the median
over rounds of the prefill time (prompt tokens / s) and of the mean decode step (tokens / s),
with their spread; its greedy tokens against ONNX Runtime's; tilegraph's kernel builds after its
compile (0: no length recompiled anything) and torch.compile's compile count.
Writes generate.md and generate.json into --out.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any


def _torch_step(module: Any, names: tuple[str, ...]) -> Any:
    import torch

    def step(feeds: dict[str, Any]) -> list[Any]:
        with torch.inference_mode():
            out = module(*[torch.from_numpy(feeds[n]) for n in names if n in feeds])
        return [t.numpy() for t in out]

    return step


# Before each system's generation: ONNX Runtime's threads spin on after a run (tilegraph's prefill
# right after an ONNX Runtime generation: 61-66 ms; 0.2 s later, 47-50 ms), as OpenMP's do.
SETTLE_S = 0.2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("generate", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--budget", type=float, default=300.0, help="tuning seconds, both models together")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--exporter", choices=("dynamo", "legacy"), default="dynamo")
    ap.add_argument("--small", action="store_true", help="the reduced configuration (a smoke test)")
    ap.add_argument("--db", default=None, help="tuning database (default: a fresh one in --out)")
    ap.add_argument("--any-prompt", action="store_true",
                    help="tune every prompt length alike (default: weighed to --prompt-len's buckets)")
    ap.add_argument("--systems", default="tilegraph,onnxruntime,eager,torch.compile")
    ap.add_argument("--out", default="benchmarks/results/generate")
    args = ap.parse_args(argv)
    from benchmarks.run import cpu_model, set_thread_environment

    set_thread_environment(args.threads)
    import numpy as np
    import onnxruntime as ort
    import torch

    from tilegraph import driver
    from tilegraph.graph import zoo
    from tilegraph.graph.generate import compile_decoder, greedy, model_step, onnxruntime_step
    from tilegraph.runtime import threads

    torch.set_num_threads(args.threads)
    threads.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    scratch = tempfile.mkdtemp(prefix="tg-generate-")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        prefill_path, decode_path = zoo.export_decoder("gpt2", scratch, small=args.small, exporter=args.exporter)
    max_length = args.prompt_len + args.new_tokens
    modules = (zoo.decoder_model("gpt2", args.small, past=False), zoo.decoder_model("gpt2", args.small, past=True))
    prompt = np.random.default_rng(0).integers(0, modules[1].config.vocab_size, args.prompt_len)
    steps: dict[str, tuple[Any, Any]] = {}
    notes: dict[str, Any] = {}
    if "tilegraph" in systems:
        log(f"tilegraph: compiling with {args.budget:g} s of tuning")
        start = time.perf_counter()
        expected = None if args.any_prompt else [args.prompt_len]
        decoder = compile_decoder(prefill_path, decode_path, max_length, time_budget=args.budget,
                                  db=args.db or str(out / "generate.db"), num_threads=args.threads,
                                  prompt_lengths=expected)
        notes["tilegraph_tuned_for_prompts"] = expected or "every length alike"
        notes["tilegraph_compile_s"] = round(time.perf_counter() - start, 1)
        builds: list[Any] = []
        real_build = driver.build
        driver.build = lambda *a, **k: builds.append(a) or real_build(*a, **k)
        steps["tilegraph"] = (model_step(decoder.prefill), model_step(decoder.decode))
    if "onnxruntime" in systems:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
        steps["onnxruntime"] = tuple(onnxruntime_step(ort.InferenceSession(str(p), options,
                                                                           providers=["CPUExecutionProvider"]))
                                     for p in (prefill_path, decode_path))
    if "eager" in systems:
        steps["eager"] = (_torch_step(modules[0], zoo.DECODER_INPUTS), _torch_step(modules[1], zoo.DECODER_INPUTS))
    if "torch.compile" in systems:
        import torch._dynamo

        torch._dynamo.reset()
        compiled = [torch.compile(m, dynamic=True) for m in modules]
        steps["torch.compile"] = (_torch_step(compiled[0], zoo.DECODER_INPUTS),
                                  _torch_step(compiled[1], zoo.DECODER_INPUTS))
    runs: dict[str, list[Any]] = {name: [] for name in steps}
    for name, (first, rest) in steps.items():  # warm-up (torch.compile compiles here)
        start = time.perf_counter()
        runs[name].append(greedy(first, rest, prompt, args.new_tokens))
        log(f"{name}: warm-up generation {time.perf_counter() - start:.1f} s")
    if "torch.compile" in steps:
        from torch._dynamo.utils import counters

        notes["torch_compile_frames"] = int(counters["stats"]["unique_graphs"])
    warm = {name: r[0] for name, r in runs.items()}
    for name in runs:
        runs[name] = []
    if "tilegraph" in steps:
        builds.clear()
    for k in range(args.rounds):
        for name, (first, rest) in steps.items():
            time.sleep(SETTLE_S)  # the system before may still spin its threads
            runs[name].append(greedy(first, rest, prompt, args.new_tokens))
        log(f"round {k + 1}/{args.rounds}")
    if "tilegraph" in steps:
        notes["tilegraph_builds_while_generating"] = len(builds)
        driver.build = real_build
    reference = runs.get("onnxruntime", [None])[0]
    rows = {}
    for name, generations in runs.items():
        prefill = [g.prefill_s for g in generations]
        decode = [sum(g.decode_s) / len(g.decode_s) for g in generations]
        rows[name] = {
            "prefill_ms": statistics.median(prefill) * 1e3, "prefill_spread_ms": [min(prefill) * 1e3, max(prefill) * 1e3],
            "prefill_tokens_per_s": args.prompt_len / statistics.median(prefill),
            "decode_ms_per_token": statistics.median(decode) * 1e3,
            "decode_spread_ms": [min(decode) * 1e3, max(decode) * 1e3],
            "decode_tokens_per_s": 1 / statistics.median(decode),
            "tokens_identical_to_onnxruntime": None if reference is None else generations[0].tokens == reference.tokens,
            "tokens_stable_across_rounds": all(g.tokens == warm[name].tokens for g in generations),
            "tokens": list(generations[0].tokens),
        }
    base = rows.get("onnxruntime")
    for row in rows.values():
        if base:
            row["prefill_vs_onnxruntime"] = row["prefill_tokens_per_s"] / base["prefill_tokens_per_s"]
            row["decode_vs_onnxruntime"] = row["decode_tokens_per_s"] / base["decode_tokens_per_s"]
        if "eager" in rows:
            row["prefill_vs_eager"] = row["prefill_tokens_per_s"] / rows["eager"]["prefill_tokens_per_s"]
            row["decode_vs_eager"] = row["decode_tokens_per_s"] / rows["eager"]["decode_tokens_per_s"]
    command = "python -m benchmarks.run generate " + " ".join(argv or sys.argv[2:])
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "cpu": cpu_model(),
              "threads": args.threads, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "budget_s": args.budget, "exporter": args.exporter, "small": args.small, "rounds": args.rounds,
              "command": command, "systems": rows, **notes}
    (out / "generate.json").write_text(json.dumps(report, indent=1))
    lines = [f"# GPT-2{' (small)' if args.small else ''} greedy generation: prompt {args.prompt_len}, "
             f"{args.new_tokens} new tokens", "",
             f"{report['date']}, {report['cpu']}, {args.threads} threads, tilegraph tuned {args.budget:g} s, "
             f"{args.exporter} export, {args.rounds} rounds (medians; spread min..max). `{command}`", "",
             "| system | prefill ms | prefill tok/s | vs ORT | decode ms/token | decode tok/s | vs ORT | vs eager "
             "| tokens = ORT |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['prefill_ms']:.2f} ({r['prefill_spread_ms'][0]:.2f}..{r['prefill_spread_ms'][1]:.2f}) "
            f"| {r['prefill_tokens_per_s']:.0f} | {r.get('prefill_vs_onnxruntime', float('nan')):.2f}x "
            f"| {r['decode_ms_per_token']:.2f} ({r['decode_spread_ms'][0]:.2f}..{r['decode_spread_ms'][1]:.2f}) "
            f"| {r['decode_tokens_per_s']:.1f} | {r.get('decode_vs_onnxruntime', float('nan')):.2f}x "
            f"| {r.get('decode_vs_eager', float('nan')):.2f}x | {r['tokens_identical_to_onnxruntime']} |")
    lines += ["", ", ".join(f"{k}: {v}" for k, v in notes.items())]
    (out / "generate.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
