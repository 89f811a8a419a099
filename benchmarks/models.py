"""python -m benchmarks.run models: whole models, tuned and untuned tilegraph against ONNX Runtime,
OpenVINO (fp32 hint, where installed: --peers), PyTorch eager and torch.compile, batch 1, 1 and 2 threads.

    python -m benchmarks.run models [--models resnet50,bert] [--threads 1,2] [--budget 180] [--short]

With --budget S > 0 (default 180), "tilegraph tuned" is the model compiled with time_budget=S
into a fresh database (tasks timed at the largest thread count; the 1-thread rows run the same
kernels), its tuning and compile times reported apart; its per-task table (PyTorch's kernel
beside each task) goes to tasks-MODEL.md. A plot (latency per model normalised to the fastest
system, tuning time) goes to models.png.

Per model: the transformers definition (random weights, seed 0) is exported to ONNX with the
dynamo exporter; tilegraph compiles it with time_budget=0 (a cold build cache: compile time
includes gcc); ONNX Runtime (ORT_ENABLE_ALL) runs the same file; PyTorch runs the module eager
and through torch.compile (inductor, freezing on; its compile time is the first call's). Outputs
are checked against ONNX Runtime (max |out - ref| / max |ref|). Then, per thread count, all
systems are timed alternately in rounds (tilegraph.graph.race): warm-up, medians of per-round
medians, spread = (max - min) / median over rounds. Results: Markdown and CSV in --out.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import importlib.util
import io
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

# OpenVINO joins the default peers where it is installed (`pip install 'tilegraph[bench]'`)
PEERS = ("onnxruntime", *(("openvino",) if importlib.util.find_spec("openvino") else ()), "torch", "torch.compile")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run models")
    p.add_argument("suites", nargs="*")
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert,gpt2")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="timing seconds per system and thread count")
    p.add_argument("--no-unfused", dest="unfused", action="store_false",
                   help="skip the fuse=False build (timed beside the fused one by default)")
    p.add_argument("--no-greedy", dest="greedy", action="store_false",
                   help="skip the orchestration='greedy' build (timed beside the default BLP one by default)")
    p.add_argument("--budget", type=float, default=180.0, help="whole-model tuning seconds per model (0: untuned only)")
    p.add_argument("--isa", default=None, help="avx2 or avx512: tilegraph and PyTorch restricted to it (benchmarks/run.py)")
    p.add_argument("--short", action="store_true", help="reduced-depth models, one round: checks the harness")
    p.add_argument("--out", default=None)
    args, _ = p.parse_known_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.threads = sorted({int(t) for t in args.threads.split(",") if t})
    args.peers = [x for x in args.peers.split(",") if x]
    if args.short:
        args.models, args.rounds, args.seconds, args.threads = args.models[:1], 1, 0.1, args.threads[:1]
        args.budget = min(args.budget, 10.0)
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    cold = tempfile.mkdtemp(prefix="tilegraph-models-")
    os.environ["TILEGRAPH_CACHE_DIR"] = os.path.join(cold, "cache")
    import numpy as np
    import torch

    import tilegraph as tg
    from tilegraph.graph import zoo
    from tilegraph.graph.race import peer, race
    from tilegraph.graph.tuning.progress import TuningProgress

    warnings.filterwarnings("ignore")
    rows = []
    tasks_table: dict[str, object] = {}
    for name in args.models:
        log = lambda msg: print(f"[{name}] {msg}", file=sys.stderr, flush=True)  # noqa: B023, E731
        path = Path(cold) / f"{name}.onnx"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            zoo.export_onnx(name, path, small=args.short)
        start = time.perf_counter()
        model = tg.compile(str(path))
        compile_s = time.perf_counter() - start
        log(f"compiled in {compile_s:.1f} s: {model.summary()}")
        report = model.orchestration
        if report is not None:
            log(report.summary())
        variants, variant_compile = {}, {}  # the same kernels built other ways: fusion's and BLP's effect
        tuning_s: dict[str, float] = {}
        if args.budget > 0:
            tg.set_num_threads(max(args.threads))
            start = time.perf_counter()
            tuned = tg.compile(str(path), db=str(Path(cold) / f"{name}.db"), time_budget=args.budget,
                               num_threads=max(args.threads), tune_progress=TuningProgress(name, args.budget))
            total = time.perf_counter() - start
            variants["tilegraph tuned"] = tuned
            tuning_s["tilegraph tuned"] = tuned.tuning.elapsed_s
            variant_compile["tilegraph tuned"] = total - tuned.tuning.elapsed_s
            log(f"tuned {tuned.tuning.elapsed_s:.1f} s (budget {args.budget:.0f} s), "
                f"compiled {variant_compile['tilegraph tuned']:.1f} s")
            tasks_table[name] = tuned.tuning
        for label, options, wanted in (("tilegraph greedy", {"orchestration": "greedy"}, args.greedy),
                                       ("tilegraph fuse=False", {"fuse": False}, args.unfused)):
            if wanted:
                start = time.perf_counter()
                variants[label] = tg.compile(str(path), **options)
                variant_compile[label] = time.perf_counter() - start
        rng = np.random.default_rng(0)
        inputs = {n: (rng.integers(0, 1000, model.graph.type_of(n).shape).astype(np.int64)
                      if model.graph.type_of(n).dtype == "int64"
                      else rng.standard_normal(model.graph.type_of(n).shape).astype(np.float32))
                  for n in model.input_names}
        module = zoo.torch_model(name, small=args.short)[0] if any(p.startswith("torch") for p in args.peers) else None
        weights_mb = sum(a.nbytes for a in model.graph.constants.values()) / 1e6
        for threads in args.threads:
            tg.set_num_threads(threads)
            torch.set_num_threads(threads)
            contenders = {"tilegraph": lambda: model.run(inputs)}  # noqa: B023
            ours = model.run(inputs)
            errors, compile_times = {}, {"tilegraph": compile_s, **variant_compile}
            for label, variant in variants.items():
                contenders[label] = lambda variant=variant: variant.run(inputs)  # noqa: B023
            for system in args.peers:
                start = time.perf_counter()
                call, outputs = peer(system, str(path), module, inputs, threads)
                expected = outputs()  # the first call: torch.compile compiles here
                compile_times[system] = time.perf_counter() - start
                errors[system] = max(float(np.abs(ours[o] - e).max() / max(float(np.abs(e).max()), 1e-30))
                                     for o, e in zip(model.output_names, expected))
                contenders[system] = call
                if system == "onnxruntime":
                    for label, variant in variants.items():
                        theirs = variant.run(inputs)
                        errors[label] = max(float(np.abs(theirs[o] - e).max() / max(float(np.abs(e).max()), 1e-30))
                                            for o, e in zip(model.output_names, expected))
            times = race(contenders, rounds=args.rounds, seconds=args.seconds)
            for system, result in times.items():
                rows.append({
                    "model": name, "threads": threads, "system": system, "latency_ms": result.median_s * 1e3,
                    "spread": result.spread, "vs_tilegraph": times["tilegraph"].median_s / result.median_s,
                    "compile_s": compile_times.get(system, float("nan")),
                    "tuning_s": tuning_s.get(system),
                    "rel_error_vs_ort": errors.get("onnxruntime") if system == "tilegraph" else errors.get(system),
                    "fusion_speedup": times["tilegraph fuse=False"].median_s / times["tilegraph"].median_s
                    if system == "tilegraph" and "tilegraph fuse=False" in times else None,
                    "arena_mb": model.arena_bytes / 1e6 if system == "tilegraph" else None,
                    "arena_lower_bound_mb": model.lower_bound_bytes / 1e6 if system == "tilegraph" else None,
                    "weights_mb": weights_mb if system == "tilegraph" else None,
                    "blp_vs_greedy": times["tilegraph greedy"].median_s / times["tilegraph"].median_s
                    if system == "tilegraph" and "tilegraph greedy" in times else None,
                    "solver_s": report.result.solver_s if system == "tilegraph" and report is not None else None,
                    "kernels": _kernels({"tilegraph": model, **variants}.get(system)),
                    "peak_rss_mb": _peak_rss_mb(),
                })
                log(f"{threads}T {system}: {result.median_s * 1e3:.2f} ms (spread {result.spread:.1%})")
            for label, what in (("tilegraph fuse=False", "fused / fuse=False"), ("tilegraph greedy", "BLP / greedy")):
                if label in times:
                    log(f"{threads}T {what}: {times[label].median_s / times['tilegraph'].median_s:.2f}x")
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / (
        f"{datetime.date.today().isoformat()}-models" + ("-short" if args.short else ""))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "models.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    command = "python -m benchmarks.run models " + " ".join(a for a in argv if a != "models")
    text = markdown(rows, command)
    if tasks_table:
        text += tuned_markdown(rows)
        with contextlib.suppress(Exception):  # the vendor column needs torch; the table stands without it
            for name, report in tasks_table.items():
                report.add_vendor_times(max(args.threads))  # type: ignore[attr-defined]
                (out / f"tasks-{name}.md").write_text(f"# {name}: tasks after {report.budget_s:.0f} s of tuning\n\n"
                                                      f"```\n{report.table()}\n```\n")  # type: ignore[attr-defined]
        plot(rows, out / "models.png")
    (out / "models.md").write_text(text)
    print(text)
    return 0


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


SYSTEMS = ("tilegraph tuned", "tilegraph", "onnxruntime", "openvino", "torch.compile", "torch")


def tuned_markdown(rows: list[dict]) -> str:
    """The tuned model against every peer: latency, peer / tuned ratios (above 1: tuned is faster)."""
    by_key = {(r["model"], r["threads"], r["system"]): r for r in rows}
    lines = ["", "Tuned: latency (ms) per system; ratios are that system's latency / tuned tilegraph's (above 1: "
             "tuned tilegraph is faster).", "",
             "| model | threads | tuned | untuned | ORT | OpenVINO | torch.compile | eager | ORT / tuned | OpenVINO / tuned | "
             "torch.compile / tuned | eager / tuned | tuning (s) | compile (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, threads, system), r in by_key.items():
        if system != "tilegraph tuned":
            continue

        def ms(sys_: str, model: str = model, threads: int = threads) -> str:
            other = by_key.get((model, threads, sys_))
            return f"{other['latency_ms']:.2f}" if other else "-"

        def ratio(sys_: str, model: str = model, threads: int = threads, r: dict = r) -> str:
            other = by_key.get((model, threads, sys_))
            return f"{other['latency_ms'] / r['latency_ms']:.2f}x" if other else "-"

        lines.append(f"| {model} | {threads} | {r['latency_ms']:.2f} | {ms('tilegraph')} | {ms('onnxruntime')} | "
                     f"{ms('openvino')} | {ms('torch.compile')} | {ms('torch')} | {ratio('onnxruntime')} | "
                     f"{ratio('openvino')} | {ratio('torch.compile')} | {ratio('torch')} | {r['tuning_s']:.0f} | "
                     f"{r['compile_s']:.0f} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    """Latency per model normalised to the fastest system (largest thread count), and tuning time.
    Skipped, with a note, where matplotlib is not installed (`scripts/setup.sh test` does not add it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot skipped: matplotlib is not installed ({e})", file=sys.stderr)
        return

    threads = max(r["threads"] for r in rows)
    models = list(dict.fromkeys(r["model"] for r in rows))
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in rows)]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        values = []
        for m in models:
            mine = [r["latency_ms"] for r in rows if r["model"] == m and r["threads"] == threads and r["system"] == system]
            fastest = min(r["latency_ms"] for r in rows if r["model"] == m and r["threads"] == threads
                          and r["system"] in systems)
            values.append(mine[0] / fastest if mine else 0)
        ax.bar([x + i * width for x in range(len(models))], values, width, label=system)
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(models))], models)
    ax.set_ylabel(f"latency / fastest ({threads} threads)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    tuning = [next((r["tuning_s"] for r in rows if r["model"] == m and r["system"] == "tilegraph tuned"), 0) or 0
              for m in models]
    ax2.bar(models, tuning)
    ax2.set_ylabel("tuning time (s)")
    ax2.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _kernels(model: object) -> str:
    if model is None:
        return ""
    return f"{len(model.steps)} launches / {len(model.kernel_objects)} distinct"  # type: ignore[attr-defined]


def markdown(rows: list[dict], command: str) -> str:
    import platform

    lines = [f"Command: `{command.strip()}`; {datetime.datetime.now().isoformat(timespec='seconds')}, "
             f"{platform.machine()}, {os.cpu_count()} cores, ISA {os.environ.get('TILEGRAPH_HOST_ISA', 'host')}. "
             "Latency: median of per-round medians (alternating rounds); "
             "tilegraph / system = tilegraph latency / that system's latency (above 1: tilegraph is that many times "
             "slower); error: max |out - ORT| / max |ORT|.",
             "", "| model | threads | system | latency (ms) | spread | tilegraph / system | compile (s) | error vs ORT | "
             "arena / lower bound (MB) | weights (MB) | kernels |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        arena = f"{r['arena_mb']:.1f} / {r['arena_lower_bound_mb']:.1f}" if r["arena_mb"] is not None else ""
        weights = f"{r['weights_mb']:.0f}" if r["weights_mb"] is not None else ""
        error = f"{r['rel_error_vs_ort']:.1e}" if r["rel_error_vs_ort"] is not None else ""
        lines.append(f"| {r['model']} | {r['threads']} | {r['system']} | {r['latency_ms']:.2f} | {r['spread']:.1%} | "
                     f"{r['vs_tilegraph']:.2f} | {r['compile_s']:.1f} | {error} | {arena} | {weights} | {r['kernels']} |")
    lines += ["", "Fusion and orchestration (same run): latency (ms) and kernel launches per way of building.", "",
              "| model | threads | fuse=False | greedy | BLP (default) | fused / fuse=False | BLP / greedy | "
              "HiGHS (s) |", "|---|---|---|---|---|---|---|---|"]
    by_key = {(r["model"], r["threads"], r["system"]): r for r in rows}
    for r in rows:
        if r["system"] != "tilegraph":
            continue

        def cell(system: str, r: dict = r) -> str:
            other = by_key.get((r["model"], r["threads"], system))
            return f"{other['latency_ms']:.2f} ({other['kernels'].split(' ')[0]})" if other else "-"

        fusion = f"{r['fusion_speedup']:.2f}x" if r["fusion_speedup"] else "-"
        blp = f"{r['blp_vs_greedy']:.2f}x" if r["blp_vs_greedy"] else "-"
        solver = f"{r['solver_s']:.2f}" if r["solver_s"] is not None else "-"
        lines.append(f"| {r['model']} | {r['threads']} | {cell('tilegraph fuse=False')} | {cell('tilegraph greedy')} | "
                     f"{cell('tilegraph')} | {fusion} | {blp} | {solver} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
