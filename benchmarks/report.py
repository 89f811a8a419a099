"""Turn measured rows into results.csv, report.md and plot.png; nothing in them is typed by hand.

    rows = [Row(suite="transformer-gemm", workload="mlp-up-s128", system="torch", threads=1, ...), ...]
    write_all(out_dir, rows, meta)      # meta: fingerprint, CPU, cores, peaks, command, date, notes

A row is one (workload, system, thread count). status is "ok", "wrong" (output differs from the
float64 reference), "failed" or "skipped"; only "ok" and "wrong" rows carry timings. Rows of suites
not in this run, found in an existing results.csv in out_dir, are kept so that one directory per
day and machine collects every suite.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

REL_ERR_TOLERANCE = 1e-3


@dataclass
class Row:
    suite: str
    workload: str
    system: str
    threads: int = 0
    op: str = ""
    params: str = ""
    flops: int = 0
    status: str = "ok"
    median_s: float = math.nan
    iqr_pct: float = math.nan
    minmax_pct: float = math.nan
    rounds: int = 0
    inner: int = 0
    gflops: float = math.nan
    peak_fraction: float = math.nan
    tuning_time_s: float = math.nan
    measurements: int | None = None
    rel_err: float = math.nan
    foreign_cores: float = math.nan
    note: str = ""

    @property
    def timed(self) -> bool:
        return self.status in ("ok", "wrong") and not math.isnan(self.median_s)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def read_csv(path: str) -> list[Row]:
    rows = []
    with open(path, newline="") as fh:
        for rec in csv.DictReader(fh):
            kw: dict[str, Any] = {}
            for f in fields(Row):
                value = rec.get(f.name, "")
                if f.name in ("threads", "flops", "rounds", "inner"):
                    kw[f.name] = int(value or 0)
                elif f.name == "measurements":
                    kw[f.name] = int(value) if value not in ("", "None") else None
                elif f.type in ("float", float):
                    kw[f.name] = _float(value)
                else:
                    kw[f.name] = value
            rows.append(Row(**kw))
    return rows


def write_csv(path: str, rows: Sequence[Row]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=[f.name for f in fields(Row)])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(r).items()})


# ------------------------------------------------------------------------------------- markdown


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else format(x, spec)


def _order(rows: Sequence[Row], attr: str) -> list[Any]:
    seen: dict[Any, None] = {}
    for r in rows:
        seen.setdefault(getattr(r, attr), None)
    return list(seen)


def geomean(values: Sequence[float]) -> float:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan


def ratio_summary(rows: Sequence[Row]) -> list[tuple[int, str, str, float, int]]:
    """(threads, tilegraph system, peer, geomean of peer time / tilegraph time, workloads) over correct rows."""
    by_key = {(r.workload, r.system, r.threads): r for r in rows if r.status == "ok" and r.timed}
    tg_systems = [s for s in _order(rows, "system") if s.startswith("tilegraph")]
    peers = [s for s in _order(rows, "system") if not s.startswith("tilegraph")]
    out = []
    for threads in sorted({r.threads for r in rows if r.threads}):
        for tg in tg_systems:
            for peer in peers:
                ratios = [by_key[(w, peer, threads)].median_s / by_key[(w, tg, threads)].median_s
                          for w in _order(rows, "workload") if (w, peer, threads) in by_key and (w, tg, threads) in by_key]
                if ratios:
                    out.append((threads, tg, peer, geomean(ratios), len(ratios)))
    return out


def markdown(rows: Sequence[Row], meta: dict[str, Any]) -> str:
    lines = [f"# tilegraph benchmarks, {meta.get('date', '')}", ""]
    peaks = meta.get("peaks_gflops") or {}
    lines += [
        f"- machine fingerprint: `{meta.get('fingerprint', '') or 'unavailable'}`",
        f"- CPU: {meta.get('cpu_model', 'unknown')}, {meta.get('cores', '?')} logical cores, host {meta.get('hostname', '')}",
        "- measured fp32 peak: " + (", ".join(f"{t} thread(s) {_fmt(v, '.1f')} GFLOP/s" for t, v in sorted(peaks.items()))
                                    or meta.get("peak_note", "unavailable")),
        f"- software: {meta.get('software', '')}",
        f"- threading: {meta.get('threading', '')}",
        f"- ISA: {meta.get('isa', 'host')}" + (f" (every system restricted: {meta['isa_environment']})"
                                                 if meta.get("isa_environment") else ""),
        f"- protocol: {meta.get('protocol', '')}",
        "- foreign load: cores other processes kept busy while the row's thread setting was timed "
        "(/proc/stat); rows with foreign load > 0.3 are noisy, 2-thread rows especially",
    ]
    for run in meta.get("runs", []):
        lines.append(f"- run {run.get('date', '')} ({', '.join(run.get('suites', []))}): `{run.get('command', '')}`")
    lines.append("")
    for suite in _order(rows, "suite"):
        srows = [r for r in rows if r.suite == suite]
        lines += [f"## {suite}", ""]
        summary = ratio_summary(srows)
        if summary:
            lines += ["Speed of tilegraph relative to each peer (geometric mean over workloads where both are correct; "
                      ">1 means tilegraph is faster):", "",
                      "| threads | tilegraph | peer | peer time / tilegraph time | workloads |",
                      "|---|---|---|---|---|"]
            lines += [f"| {t} | {tg} | {p} | {_fmt(g, '.2f')} | {n} |" for t, tg, p, g, n in summary]
            lines.append("")
        for threads in sorted({r.threads for r in srows if r.threads}):
            lines += [f"### {threads} thread(s)", "",
                      "| workload | system | median ms | IQR % | min-max % | GFLOP/s | % of peak | vs best | tuning s "
                      "| measurements | rel. error | check | foreign load |", "|---" * 13 + "|"]
            trows = [r for r in srows if r.threads == threads and r.timed]
            for w in _order(trows, "workload"):
                wrows = [r for r in trows if r.workload == w]
                best = min((r.median_s for r in wrows if r.status == "ok"), default=math.nan)
                for r in wrows:
                    check = "ok" if r.status == "ok" else "**WRONG**"
                    lines.append(
                        f"| {w} | {r.system} | {_fmt(r.median_s * 1e3, '.4g')} | {_fmt(r.iqr_pct, '.1f')} | "
                        f"{_fmt(r.minmax_pct, '.1f')} | {_fmt(r.gflops, '.1f')} | {_fmt(r.peak_fraction * 100, '.0f')} | "
                        f"{_fmt(best / r.median_s, '.2f')} | {_fmt(r.tuning_time_s, '.1f')} | "
                        f"{'' if r.measurements is None else r.measurements} | {_fmt(r.rel_err, '.1e')} | {check} | "
                        f"{_fmt(r.foreign_cores, '.2f')} |")
            lines.append("")
        notes = [r for r in srows if r.status in ("skipped", "failed") or (r.note and r.timed)]
        if notes:
            lines += ["Notes:", ""]
            seen = set()
            for r in notes:
                text = f"- {r.workload} / {r.system}" + (f" ({r.threads}T)" if r.threads else "") + f": {r.status}: {r.note}"
                key = (r.workload, r.system, r.status, r.note)
                if key not in seen:
                    seen.add(key)
                    lines.append(text)
            lines.append("")
    if meta.get("notes"):
        lines += ["## Run notes", ""] + [f"- {n}" for n in meta["notes"]] + [""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- plot


def plot(path: str, rows: Sequence[Row]) -> str | None:
    """Grouped bars of throughput normalised to the best system per workload (at the largest thread
    count), and tuning/compile time on a log axis. Returns a note when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"plot skipped: matplotlib not installed ({exc})"
    suites = _order(rows, "suite")
    systems = _order(rows, "system")
    colours = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(systems)}
    widths = [max(9.0, 0.55 * len(_order([r for r in rows if r.suite == s], "workload"))) for s in suites] or [6.0]
    fig, axes = plt.subplots(len(suites) * 2 or 1, 1, figsize=(max(widths), 4.2 * max(1, len(suites) * 2)), squeeze=False)
    for si, suite in enumerate(suites):
        srows = [r for r in rows if r.suite == suite and r.timed]
        threads = max((r.threads for r in srows), default=0)
        trows = [r for r in srows if r.threads == threads]
        workloads = _order(trows, "workload")
        best: dict[str, float] = defaultdict(float)
        for r in trows:
            if r.status == "ok" and r.median_s > 0:
                best[r.workload] = max(best[r.workload], 1.0 / r.median_s)
        width = 0.8 / max(1, len(systems))
        ax, tax = axes[2 * si][0], axes[2 * si + 1][0]
        for k, system in enumerate(systems):
            xs, ys, ts, txs = [], [], [], []
            for wi, w in enumerate(workloads):
                match = [r for r in trows if r.workload == w and r.system == system]
                if match and best[w] > 0 and match[0].status == "ok":
                    xs.append(wi + (k - (len(systems) - 1) / 2) * width)
                    ys.append((1.0 / match[0].median_s) / best[w])
                if match and match[0].tuning_time_s > 0:
                    txs.append(wi + (k - (len(systems) - 1) / 2) * width)
                    ts.append(match[0].tuning_time_s)
            if xs:
                ax.bar(xs, ys, width, label=system, color=colours[system])
            if ts:
                tax.bar(txs, ts, width, label=system, color=colours[system])
        for a in (ax, tax):
            a.set_xticks(range(len(workloads)))
            a.set_xticklabels(workloads, rotation=45, ha="right", fontsize=7)
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("throughput / best")
        ax.set_title(f"{suite}: throughput / best system, {threads} thread(s)", fontsize=10)
        ax.legend(fontsize=7, ncol=min(4, len(systems)))
        tax.set_yscale("log")
        tax.set_ylabel("tuning / compile s (log)")
        tax.set_title(f"{suite}: one-time tuning or compile time", fontsize=10)
        if tax.get_legend_handles_labels()[0]:
            tax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def merge_rows(out_dir: str, rows: Sequence[Row]) -> list[Row]:
    """This run's rows plus rows of other suites already in out_dir/results.csv."""
    path = os.path.join(out_dir, "results.csv")
    if not os.path.exists(path):
        return list(rows)
    suites = {r.suite for r in rows}
    try:
        old = [r for r in read_csv(path) if r.suite not in suites]
    except (OSError, ValueError, TypeError, csv.Error):
        old = []
    return old + list(rows)


def merge_runs(out_dir: str, meta: dict[str, Any]) -> dict[str, Any]:
    """meta with meta['runs'] extended by the earlier runs recorded in out_dir/run.json (other suites only)."""
    path = os.path.join(out_dir, "run.json")
    earlier: list[dict[str, Any]] = []
    if os.path.exists(path):
        try:
            with open(path) as fh:
                earlier = json.load(fh).get("runs", [])
        except (OSError, ValueError):
            earlier = []
    mine = set(meta.get("suites", []))
    kept = [r for r in earlier if not mine & set(r.get("suites", []))]
    return {**meta, "runs": kept + list(meta.get("runs", []))}


def write_all(out_dir: str, rows: Sequence[Row], meta: dict[str, Any]) -> dict[str, str]:
    """Write results.csv, report.md, plot.png and run.json into out_dir; returns name -> path."""
    os.makedirs(out_dir, exist_ok=True)
    all_rows = merge_rows(out_dir, rows)
    meta = merge_runs(out_dir, meta)
    paths = {name: os.path.join(out_dir, name) for name in ("results.csv", "report.md", "plot.png", "run.json")}
    write_csv(paths["results.csv"], all_rows)
    plot_note = plot(paths["plot.png"], all_rows)
    if plot_note:
        meta = {**meta, "notes": [*meta.get("notes", []), plot_note]}
        paths.pop("plot.png")
    with open(paths["run.json"], "w") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True, default=str)
    with open(paths["report.md"], "w") as fh:
        fh.write(markdown(all_rows, meta))
    return paths


def write_table_report(out_dir: str | None, stem: str, text: str, meta: dict[str, Any], rows: Sequence[Any]) -> None:
    """A model suite's report: <stem>.md (the table) and <stem>.json (meta and rows) in out_dir,
    created if missing; nothing when out_dir is None (the table was printed)."""
    if not out_dir:
        return
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{stem}.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(out_dir, f"{stem}.json"), "w") as fh:
        json.dump({"meta": meta, "rows": list(rows)}, fh, indent=1)
