"""One table of tilegraph against a peer across runs on several ISAs (and thread counts).

    python -m benchmarks.isa_table avx512=benchmarks/results/<run-a> avx2=benchmarks/results/<run-b> \
        [--system tilegraph-gensor] [--peer torch] [--floor 0.8]

Per workload: peer time / tilegraph time for every (run, thread count) column, both timed
alternately in that run; then the geometric mean of each column over the workloads where both
are correct, the slowest workload, and how many are below `--floor`. Ratios > 1: tilegraph is
faster.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Sequence
from pathlib import Path


def _ratios(run_dir: Path, system: str, peer: str) -> dict[tuple[str, str], float]:
    """(workload, threads) -> peer median / system median, for rows where both are ok."""
    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    median = {(r["workload"], r["threads"], r["system"]): float(r["median_s"])
              for r in rows if r["status"] == "ok" and r["median_s"]}
    out: dict[tuple[str, str], float] = {}
    for (workload, threads, name), seconds in median.items():
        theirs = median.get((workload, threads, peer))
        if name == system and theirs:
            out[(workload, threads)] = theirs / seconds
    return out


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def table(runs: Sequence[tuple[str, Path]], system: str = "tilegraph-gensor", peer: str = "torch",
          floor: float = 0.8) -> str:
    per_run = [(label, _ratios(path, system, peer)) for label, path in runs]
    columns = [(label, threads) for label, ratios in per_run for threads in sorted({t for _, t in ratios})]
    workloads = list(dict.fromkeys(w for _, ratios in per_run for w, _ in ratios))
    lookup = {label: ratios for label, ratios in per_run}
    head = "| workload | " + " | ".join(f"{label} {t}T" for label, t in columns) + " |"
    lines = [f"{peer} time / {system} time (> 1: tilegraph is faster)", "", head,
             "|---|" + "---|" * len(columns)]
    for w in workloads:
        cells = []
        for label, t in columns:
            r = lookup[label].get((w, t))
            cells.append("-" if r is None else (f"**{r:.2f}**" if r < floor else f"{r:.2f}"))
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    summary = {"geometric mean": [], "slowest": [], f"below {floor:g}": [], "workloads": []}
    for label, t in columns:
        values = {w: r for (w, th), r in lookup[label].items() if th == t}
        slowest = min(values, key=values.get) if values else None
        summary["geometric mean"].append(f"**{_geomean(list(values.values())):.2f}**")
        summary["slowest"].append(f"{slowest} {values[slowest]:.2f}" if slowest else "-")
        summary[f"below {floor:g}"].append(str(sum(r < floor for r in values.values())))
        summary["workloads"].append(str(len(values)))
    for name, cells in summary.items():
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.isa_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=DIR", help="a label and a benchmarks.run output directory")
    parser.add_argument("--system", default="tilegraph-gensor")
    parser.add_argument("--peer", default="torch")
    parser.add_argument("--floor", type=float, default=0.8, help="ratios below this are bold and counted")
    args = parser.parse_args(argv)
    runs = []
    for item in args.runs:
        label, sep, path = item.partition("=")
        if not sep or not (Path(path) / "results.csv").is_file():
            parser.error(f"{item!r}: expected LABEL=DIR with DIR/results.csv")
        runs.append((label, Path(path)))
    print(table(runs, args.system, args.peer, args.floor))


if __name__ == "__main__":
    main()
