"""Tune suite workloads with gensor, roller and random search, and race the kernels against torch eager.

    python benchmarks/gensor_suite.py                          # GMM-4 and the ansor-cpu suite, batch 1
    python benchmarks/gensor_suite.py --ids GMM-4 C2D-2 --budget 20 --threads 2 --write-docs

For every workload and strategy: tg.tune(wl, strategy=..., time_budget=budget) (fresh in-memory
database, so nothing is reused between strategies), then the best kernel and torch eager are timed
alternately (median per-call time over several rounds, same thread count). Prints one table row per
workload: latency of each strategy, torch, the ratios torch / gensor and roller / gensor (> 1: gensor
faster) and the tuning seconds. --write-docs replaces the table section of docs/gensor.md.

A benchmark, not a test: numbers from a shared machine are only directions.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import tilegraph as tg
from tilegraph import workloads
from tilegraph.runtime.timer import measure
from tilegraph.testing import random_inputs, reference_outputs

STRATEGIES = ("gensor", "roller", "random")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "gensor.md"
TABLE_BEGIN = "<!-- gensor_suite table begin -->"
TABLE_END = "<!-- gensor_suite table end -->"


def default_ids() -> list[str]:
    return ["GMM-4", *(w for w in workloads.list() if w != "GMM-4")]


# ----------------------------------------------------------------------------------------- torch eager


def torch_program(wid: str, inputs: list[np.ndarray]) -> Any:
    """A zero-argument callable computing the workload in torch eager from tilegraph's layouts
    (weight re-layouts happen here, outside the timed call), or None when torch has no such op."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    desc = workloads.describe(wid)
    op, p = desc["op"], desc["params"]
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    if op == "batch_matmul":
        return lambda: torch.matmul(t[0], t[1])
    if op == "transpose_batch_matmul":
        return lambda: torch.matmul(t[0].permute(0, 2, 1, 3), t[1].permute(0, 2, 3, 1))
    if op == "softmax":
        return lambda: torch.softmax(t[0], dim=-1)
    if op == "norm_bmn":
        return lambda: torch.linalg.vector_norm(t[0], dim=(1, 2))
    if op == "conv1d_nlc":
        w = t[1].permute(2, 1, 0).contiguous()
        return lambda: F.conv1d(t[0].permute(0, 2, 1), w, stride=p["stride"], padding=p["pad"],
                                dilation=p.get("dilation") or 1).permute(0, 2, 1)
    if op == "conv3d_ndhwc":
        x = t[0].permute(0, 4, 1, 2, 3)
        w = t[1].permute(4, 3, 0, 1, 2).contiguous(memory_format=torch.channels_last_3d)
        return lambda: F.conv3d(x, w, stride=p["stride"], padding=p["pad"]).permute(0, 2, 3, 4, 1)
    if op == "depthwise_conv2d_nhwc":
        x = t[0].permute(0, 3, 1, 2)
        w = t[1].permute(2, 3, 0, 1).contiguous(memory_format=torch.channels_last)
        return lambda: F.conv2d(x, w, stride=p["stride"], padding=p["pad"], groups=p["C"]).permute(0, 2, 3, 1)
    if op == "conv2d_transpose_nhwc":
        x = t[0].permute(0, 3, 1, 2)
        w = t[1].permute(2, 3, 0, 1).contiguous()
        return lambda: F.conv_transpose2d(x, w, stride=p["stride"], padding=p["pad"]).permute(0, 2, 3, 1)
    if op in ("conv2d_nhwc", "conv2d_bn_relu"):
        x = t[0].permute(0, 3, 1, 2)
        w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        kw = {"stride": p["stride"], "padding": p["pad"], "dilation": p.get("dilation") or 1,
              "groups": p.get("groups") or 1}
        if op == "conv2d_nhwc":
            return lambda: F.conv2d(x, w, **kw).permute(0, 2, 3, 1)
        return lambda: torch.relu((F.conv2d(x, w, **kw).permute(0, 2, 3, 1) + t[2]) * t[3] + t[4])
    return None


# ----------------------------------------------------------------------------------------- timing


def median_call_s(fn: Any, min_time: float) -> float:
    """tilegraph's one timing loop (runtime/timer.py), for tilegraph and the peers alike."""
    return measure(fn, warmup=1, min_time=min_time, repeat=3).median


def race(calls: dict[str, Any], rounds: int, min_time: float) -> dict[str, float]:
    """Median over rounds of each callable's median call time, timed alternately."""
    samples: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            samples[name].append(median_call_s(fn, min_time))
    return {k: statistics.median(v) for k, v in samples.items()}


def run_workload(wid: str, budget: float, threads: int, rounds: int, min_time: float,
                 strategies: tuple[str, ...] = STRATEGIES) -> dict[str, Any]:
    wl = workloads.get(wid)
    inputs = random_inputs(wl, seed=0)
    ref = reference_outputs(wl, inputs)
    row: dict[str, Any] = {"workload": wid}
    calls: dict[str, Any] = {}
    for strategy in strategies:
        start = time.perf_counter()
        try:
            result = tg.tune(wl, strategy=strategy, time_budget=budget, progress=False, num_threads=threads)
        except Exception as err:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{wid} {strategy}: tuning failed: {err}", file=sys.stderr)
            continue
        row[f"{strategy}_tune_s"] = time.perf_counter() - start
        kernel = result.kernel
        got = kernel(*inputs, num_threads=threads)
        got = got if isinstance(got, tuple) else (got,)
        err = max(float(np.max(np.abs(g - r)) / (np.max(np.abs(r)) + 1e-30)) for g, r in zip(got, ref))
        if not err < 1e-3:
            print(f"{wid} {strategy}: wrong result (relative error {err:.2e}); not timed", file=sys.stderr)
            continue
        calls[strategy] = lambda k=kernel: k(*inputs, num_threads=threads)
    try:
        import torch

        torch.set_num_threads(threads)
        fn = torch_program(wid, inputs)
        if fn is not None:
            with torch.inference_mode():
                fn()
            calls["torch"] = fn
    except ImportError:
        pass
    row.update(race(calls, rounds, min_time))
    return row


# ----------------------------------------------------------------------------------------- report


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def format_table(rows: list[dict[str, Any]], threads: int, budget: float) -> str:
    lines = [f"Latency in ms, {threads} thread(s), time budget {budget:g} s per strategy; ratio > 1: gensor faster.",
             "",
             "| workload | gensor | roller | random | torch | torch/gensor | roller/gensor | tune s (g/r/rand) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = r.get("gensor")
        tune = "/".join(f"{r[f'{s}_tune_s']:.0f}" if f"{s}_tune_s" in r else "-" for s in STRATEGIES)
        lines.append(f"| {r['workload']} | {_ms(g)} | {_ms(r.get('roller'))} | {_ms(r.get('random'))} | "
                     f"{_ms(r.get('torch'))} | {_ratio(r.get('torch'), g)} | {_ratio(r.get('roller'), g)} | {tune} |")
    for other in ("torch", "roller"):
        ratios = [r[other] / r["gensor"] for r in rows if r.get(other) and r.get("gensor")]
        if ratios:
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            lines.append(f"\nGeomean {other}/gensor over {len(ratios)} workloads: {geo:.2f}")
    return "\n".join(lines)


def write_docs(table: str) -> None:
    text = DOCS.read_text()
    block = f"{TABLE_BEGIN}\n{table}\n{TABLE_END}"
    if TABLE_BEGIN in text and TABLE_END in text:
        text = re.sub(re.escape(TABLE_BEGIN) + ".*?" + re.escape(TABLE_END), lambda _: block, text, flags=re.S)
    else:
        text += f"\n{block}\n"
    DOCS.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="*", default=None, help="suite ids (default: GMM-4 and the whole suite)")
    parser.add_argument("--budget", type=float, default=20.0, help="tuning seconds per workload and strategy")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.1)
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--write-docs", action="store_true", help="replace the table section of docs/gensor.md")
    args = parser.parse_args(argv)
    rows = []
    for wid in args.ids or default_ids():
        rows.append(run_workload(wid, args.budget, args.threads, args.rounds, args.min_time, tuple(args.strategies)))
        print(format_table(rows[-1:], args.threads, args.budget).splitlines()[4], flush=True)
    table = format_table(rows, args.threads, args.budget)
    print(table)
    if args.write_docs:
        write_docs(table)


if __name__ == "__main__":
    main()
