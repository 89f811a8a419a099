"""python -m benchmarks.run precision: bf16 models against the engines users run on CPUs.

    python -m benchmarks.run precision                          # resnet50, mobilenet_v2, bert, gpt2
    python -m benchmarks.run precision --only bert --threads 2 --out DIR

For each reference model (its ONNX file): tilegraph compiled with precision="bf16" (`--budget S`
seconds of tuning per model, default none: Gensor's constructed kernels) and in float32, raced in one process against ONNX Runtime
(float32), OpenVINO with the f32 hint and with the bf16 hint (where installed), alternating
rounds, medians (graph/race.py). Each system's max relative error against ONNX Runtime's float32
output on the same seeded inputs is reported beside its time, with the accuracy gate's verdict.
Writes precision.md and precision.json.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

MODELS = ("resnet50", "mobilenet_v2", "bert", "gpt2")


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run precision")
    p.add_argument("suite", choices=["precision"])
    p.add_argument("--only", default=",".join(MODELS), help="comma-separated reference models")
    p.add_argument("--threads", type=int, default=None, help="threads for every system (default: all cores)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="timing per system and model")
    p.add_argument("--budget", type=float, default=0.0,
                   help="tuning seconds per tilegraph model (tg.compile's time_budget; bf16 and float32 alike; "
                        "default 0: Gensor's constructed kernels)")
    p.add_argument("--out", default=None, help="folder for precision.md / precision.json")
    return p.parse_args(argv)


def _row(name: str, threads: int, rounds: int, seconds: float, budget: float = 0.0) -> dict:
    import tilegraph as tg
    from tilegraph.cli.models import _resolve
    from tilegraph.graph.precision import random_inputs, relative_error
    from tilegraph.graph.race import PeerUnavailable, peer, race

    onnx_path, _, _ = _resolve(name)
    start = time.perf_counter()
    bf16 = tg.compile(str(onnx_path), precision="bf16", time_budget=budget)
    compile_s = time.perf_counter() - start
    fp32 = tg.compile(str(onnx_path), time_budget=budget)
    inputs = random_inputs(fp32.graph, seed=1)
    contenders, outputs = {}, {}
    for label, model in (("tilegraph bf16", bf16), ("tilegraph fp32", fp32)):
        contenders[label] = (lambda m=model: m.run(inputs))
        outputs[label] = [model.run(inputs)[o] for o in model.output_names]
    notes = []
    for system in ("onnxruntime", "openvino", "openvino.bf16"):
        try:
            call, outs = peer(system, str(onnx_path), None, inputs, threads)
            outputs[system] = list(outs())
        except PeerUnavailable as e:
            notes.append(f"{system}: {e}")
            continue
        contenders[system] = call
    times = race(contenders, rounds=rounds, seconds=seconds)
    reference = outputs.get("onnxruntime")
    report = bf16.precision_report
    return {
        "model": name, "compile_bf16_s": round(compile_s, 1), "precision": bf16.precision,
        "gate": report.to_json() if report is not None else None,
        "ms": {k: round(v.median_s * 1e3, 3) for k, v in times.items()},
        "spread": {k: round(v.spread, 3) for k, v in times.items()},
        "error_vs_onnxruntime": {k: max(relative_error(a, b) for a, b in zip(v, reference))
                                 for k, v in outputs.items()} if reference is not None else {},
        "notes": notes,
    }


def _markdown(rows: list[dict], meta: dict) -> str:
    systems = ("tilegraph bf16", "tilegraph fp32", "onnxruntime", "openvino", "openvino.bf16")
    lines = [f"Command: `{meta['command']}`  ", f"{meta['cpu']}, {meta['threads']} threads, {meta['date']}", "",
             "| model | " + " | ".join(f"{s} ms" for s in systems) + " | bf16 vs ORT | bf16 vs OV bf16 | "
             "error bf16 | error OV bf16 | gate |",
             "|---" * (len(systems) + 6) + "|"]
    for r in rows:
        ms, err = r["ms"], r["error_vs_onnxruntime"]

        def ratio(peer: str, ms: dict = ms) -> str:
            return f"{ms[peer] / ms['tilegraph bf16']:.2f}x" if peer in ms else "-"

        gate = "passed" if r["gate"] and r["gate"]["passed"] else "failed (fp32)"
        lines.append(f"| {r['model']} | " + " | ".join(f"{ms[s]:.2f}" if s in ms else "-" for s in systems)
                     + f" | {ratio('onnxruntime')} | {ratio('openvino.bf16')} | {err.get('tilegraph bf16', 0):.1e} | "
                     + f"{err.get('openvino.bf16', float('nan')):.1e} | {gate} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = _parse(argv)
    import tilegraph as tg

    if args.threads:
        tg.set_num_threads(args.threads)
    threads = args.threads or tg.Target("cpu").num_cores
    rows = []
    for name in [m.strip() for m in args.only.split(",") if m.strip()]:
        print(f"precision: {name} ...", file=sys.stderr, flush=True)
        rows.append(_row(name, threads, args.rounds, args.seconds, args.budget))
    from benchmarks.report import write_table_report
    from benchmarks.run import cpu_model

    meta = {"command": "python -m benchmarks.run " + " ".join(argv), "cpu": cpu_model(), "threads": threads,
            "budget_s": args.budget, "date": datetime.datetime.now().isoformat(timespec="seconds")}
    text = _markdown(rows, meta)
    print(text)
    write_table_report(args.out, "precision", text, meta, rows)
    return 0
