"""python -m benchmarks.run busy: the models on a quiet machine and beside busy processes.

    python -m benchmarks.run busy                                  # mobilenet_v2, resnet50, bert, gpt2
    python -m benchmarks.run busy --only mobilenet_v2,model.onnx --busy 1,2,torch:2 --out DIR

A user's machine is rarely idle. For each model (a reference model or any ONNX file): tilegraph
compiled once (`--budget S` seconds of tuning, default none: Gensor's constructed kernels) and
timed twice, its parallel loops on tilegraph's thread pool and on libgomp (the same libraries:
runtime/thread_pool.set_pool_enabled), beside ONNX Runtime and OpenVINO (f32 hint) with the same
thread count. Each phase (quiet, then one per `--busy` item: N Python processes spinning, or
`torch:N`, a PyTorch training loop on N threads) times every system call by call in alternating
rounds; the report gives the median, the 90th percentile and the worst call, and each system's
slowdown (busy median / its quiet median). Writes busy.md and busy.json.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODELS = ("mobilenet_v2", "resnet50", "bert", "gpt2")
SPIN = "while True: pass\n"  # a competing process: one core's worth of work, never sleeping
TRAIN = """import torch
torch.set_num_threads({threads})
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 512), torch.randn(64, 512)
while True:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
"""  # a competing process as users run them: a training loop, its OpenMP threads spinning between steps


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run busy")
    p.add_argument("suite", choices=["busy"])
    p.add_argument("--only", default=",".join(MODELS), help="comma-separated reference models or ONNX paths")
    p.add_argument("--threads", type=int, default=2, help="threads for every system (default 2)")
    p.add_argument("--busy", default="1,2,torch:2",
                   help="busy phases, comma list: N spinning processes, or torch:N (a PyTorch training loop, N threads)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per phase")
    p.add_argument("--seconds", type=float, default=4.0, help="timing per system and phase")
    p.add_argument("--budget", type=float, default=0.0, help="tuning seconds per model (default 0: constructed)")
    p.add_argument("--out", default=None, help="folder for busy.md / busy.json")
    return p.parse_args(argv)


def percentile(samples: list[float], q: float) -> float:
    """The q-quantile (0..1) of `samples`, by the nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


SETTLE_S = 0.05  # before each system's turn: the previous one's spinning threads go idle


def time_calls(contenders: dict[str, Callable[[], Any]], rounds: int, seconds: float,
               prepare: dict[str, Callable[[], Any]] | None = None) -> dict[str, list[float]]:
    """Every call's seconds per contender: alternating rounds, each `seconds / rounds` long;
    `prepare[name]()` runs, untimed, before each of its turns."""
    prepare = prepare or {}
    for name, run in contenders.items():
        prepare.get(name, lambda: None)()
        run()
    calls: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, run in contenders.items():
            prepare.get(name, lambda: None)()
            time.sleep(SETTLE_S)
            deadline = time.perf_counter() + seconds / rounds
            while True:
                start = time.perf_counter()
                run()
                end = time.perf_counter()
                calls[name].append(end - start)
                if end >= deadline:
                    break
    return calls


def summary(calls: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(calls) * 1e3, "p90_ms": percentile(calls, 0.9) * 1e3,
            "max_ms": max(calls) * 1e3, "calls": len(calls)}


def competitor_programs(phase: str) -> list[str]:
    """The Python programs a busy phase runs beside the timed one: "0" none, "N" N spinning
    processes, "torch:N" one PyTorch training loop on N threads."""
    kind, _, count = phase.rpartition(":")
    if not count.isdigit() or kind not in ("", "torch"):
        raise ValueError(f"busy phase {phase!r}: expected N or torch:N")
    return [TRAIN.format(threads=int(count))] if kind == "torch" else [SPIN] * int(count)


class Competitors:
    """The competing processes of a busy phase, running while the block runs."""

    def __init__(self, phase: str):
        self.programs = competitor_programs(phase)
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> Competitors:
        self.processes = [subprocess.Popen([sys.executable, "-c", program]) for program in self.programs]
        time.sleep(3.0 if any("torch" in p for p in self.programs) else 0.5 if self.programs else 0.0)
        return self  # they are running (torch imported) before the first call is timed

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def _contenders(name: str, threads: int, budget: float) -> tuple[dict[str, Callable[[], Any]],
                                                                 dict[str, Callable[[], Any]], list[str], float]:
    import tilegraph as tg
    from tilegraph.cli.models import _resolve
    from tilegraph.graph.precision import random_inputs
    from tilegraph.graph.race import PeerUnavailable, peer
    from tilegraph.runtime.thread_pool import set_pool_enabled

    onnx_path = Path(name) if name.endswith(".onnx") else _resolve(name)[0]
    start = time.perf_counter()
    model = tg.compile(str(onnx_path), time_budget=budget)
    compile_s = time.perf_counter() - start
    inputs = random_inputs(model.graph, seed=1)

    def run() -> Any:
        return model.run(inputs)

    contenders: dict[str, Callable[[], Any]] = {"tilegraph": run, "tilegraph libgomp": run}
    prepare = {"tilegraph": lambda: set_pool_enabled(True), "tilegraph libgomp": lambda: set_pool_enabled(False)}
    notes = []
    for system in ("onnxruntime", "openvino"):
        try:
            contenders[system] = peer(system, str(onnx_path), None, inputs, threads)[0]
        except PeerUnavailable as e:
            notes.append(f"{system}: {e}")
    return contenders, prepare, notes, compile_s


def _markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Command: `{meta['command']}`  ",
             f"{meta['cpu']}, {meta['threads']} threads per system, {meta['date']}; a busy phase runs N processes "
             "spinning on the CPU (torch:N: a PyTorch training loop on N threads) beside the timed one. "
             "Per call: median / 90th percentile / worst, ms; "
             "slowdown = busy median / quiet median.", "",
             "| model | system | " + " | ".join(f"{p} ms" for p in meta["phases"])
             + " | " + " | ".join(f"slowdown {p}" for p in meta["phases"][1:]) + " |",
             "|---" * (2 + 2 * len(meta["phases"]) - 1) + "|"]
    for r in rows:
        for system, phases in r["systems"].items():
            quiet = phases[meta["phases"][0]]["median_ms"]
            cells = [f"{s['median_ms']:.2f} / {s['p90_ms']:.2f} / {s['max_ms']:.1f}"
                     for s in (phases[p] for p in meta["phases"])]
            slow = [f"{phases[p]['median_ms'] / quiet:.2f}x" for p in meta["phases"][1:]]
            lines.append(f"| {r['model']} | {system} | " + " | ".join(cells + slow) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = _parse(argv)
    import tilegraph as tg
    from benchmarks.report import write_table_report
    from benchmarks.run import cpu_model
    from tilegraph.runtime.thread_pool import set_pool_enabled

    tg.set_num_threads(args.threads)
    busy = [b.strip() for b in args.busy.split(",") if b.strip()]
    for b in busy:
        competitor_programs(b)  # a bad phase is an error before anything compiles
    phases = ["quiet", *(f"busy {b}" for b in busy)]
    rows = []
    for name in [m.strip() for m in args.only.split(",") if m.strip()]:
        print(f"busy: {name} ...", file=sys.stderr, flush=True)
        contenders, prepare, notes, compile_s = _contenders(name, args.threads, args.budget)
        systems: dict[str, dict[str, dict[str, float]]] = {s: {} for s in contenders}
        for phase, competitors in zip(phases, ["0", *busy]):
            with Competitors(competitors):
                calls = time_calls(contenders, args.rounds, args.seconds, prepare)
            for system, samples in calls.items():
                systems[system][phase] = summary(samples)
        rows.append({"model": Path(name).stem, "compile_s": round(compile_s, 1), "systems": systems, "notes": notes})
    meta = {"command": "python -m benchmarks.run " + " ".join(argv), "cpu": cpu_model(), "threads": args.threads,
            "phases": phases, "budget_s": args.budget, "date": datetime.datetime.now().isoformat(timespec="seconds")}
    set_pool_enabled(True)
    text = _markdown(rows, meta)
    print(text)
    write_table_report(args.out, "busy", text, meta, rows)
    return 0
