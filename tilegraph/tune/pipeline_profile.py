"""The measurement pipeline's profile: where a tuning run's time goes, per candidate and stage.

    with TuneSession("cpu", db) as session:
        session.tune_slice(wl, strategy, trials=32)
        print(session.profile.format())        # `tilegraph tune --profile` prints the same table

Stages in the tuning process, on the search loop's critical path (their sum is the loop's wall
time, less what nobody marked): propose (sampling, cost-model ranking), build (waiting for the
builder workers; the batch's first checks' inputs and references are drawn meanwhile), inputs and
reference (fresh random inputs and their float64 reference, for checks not drawn ahead), run
(waiting for the runner: lock, IPC and the worker's stages), commit (the database),
notify (the strategy learns: cost-model training). Stages inside the workers, summed over
candidates (builds run in parallel, so they may add up to more than the wall time spent waiting):
build.replay / lower / print / compile (gcc, or a build-cache hit), run.load / check / time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LOOP_STAGES = ("propose", "build", "inputs", "reference", "run", "commit", "notify")
BUILD_STAGES = ("build.replay", "build.lower", "build.print", "build.compile")
RUN_STAGES = ("run.load", "run.check", "run.time")
WHAT = {
    "propose": "sampling and cost-model ranking",
    "build": "waiting for the builder workers (drawing checks' inputs meanwhile)",
    "inputs": "fresh random inputs", "reference": "float64 reference of each check",
    "run": "waiting for the runner (lock, IPC, worker)", "commit": "database writes",
    "notify": "the strategy learns (cost model)", "build.replay": "trace replayed onto the workload",
    "build.lower": "lowering passes", "build.print": "C/CUDA/OpenCL printed", "build.compile": "compiler (or cache hit)",
    "run.load": "library loaded, arguments bound", "run.check": "one run checked against the reference",
    "run.time": "timing loop",
}


@dataclass
class PipelineProfile:
    """Seconds by stage (tilegraph.stages names) over `candidates` measured candidates (`runs`
    runner calls: a new best is measured twice), `built` builds and `wall_s` of search loop."""

    seconds: dict[str, float] = field(default_factory=dict)
    candidates: int = 0
    runs: int = 0
    built: int = 0
    wall_s: float = 0.0

    def add(self, seconds: dict[str, float], candidates: int, runs: int, built: int, wall_s: float) -> None:
        for name, s in seconds.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + s
        self.candidates += candidates
        self.runs += runs
        self.built += built
        self.wall_s += wall_s

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.wall_s if self.wall_s > 0 else 0.0

    def rows(self) -> list[dict[str, Any]]:
        """One row per stage seen: name, seconds, ms per candidate, share of the loop's wall time."""
        per = max(1, self.candidates)
        names = [*LOOP_STAGES, *BUILD_STAGES, *RUN_STAGES]
        names += sorted(set(self.seconds) - set(names))
        rows = []
        for name in names:
            if name not in self.seconds:
                continue
            s = self.seconds[name]
            rows.append({"stage": name, "seconds": s, "ms_per_candidate": 1e3 * s / per,
                         "share": s / self.wall_s if self.wall_s > 0 else 0.0, "what": WHAT.get(name, "")})
        unmarked = self.wall_s - sum(self.seconds.get(n, 0.0) for n in LOOP_STAGES)
        rows.insert(sum(1 for r in rows if r["stage"] in LOOP_STAGES),
                    {"stage": "other", "seconds": unmarked, "ms_per_candidate": 1e3 * unmarked / per,
                     "share": unmarked / self.wall_s if self.wall_s > 0 else 0.0, "what": "the loop's own bookkeeping"})
        return rows

    def slowest(self, n: int = 3) -> list[str]:
        """The n loop stages that took the most wall time, slowest first."""
        loop = [r for r in self.rows() if r["stage"] in LOOP_STAGES]
        return [r["stage"] for r in sorted(loop, key=lambda r: -r["seconds"])[:n]]

    def format(self) -> str:
        lines = [f"measurement pipeline: {self.candidates} candidates measured ({self.runs} runs, {self.built} built) "
                 f"in {self.wall_s:.1f} s of search loop = {self.candidates_per_s:.2f} candidates/s",
                 f"{'stage':<15} {'total s':>8} {'ms/cand':>9} {'share':>6}  what"]
        for r in self.rows():
            indent = "  " if "." in r["stage"] else ""
            share = f"{100 * r['share']:5.1f}%" if "." not in r["stage"] else "     -"
            lines.append(f"{indent + r['stage']:<15} {r['seconds']:8.2f} {r['ms_per_candidate']:9.1f} {share}  {r['what']}")
        lines.append("(build.* and run.* run inside the workers: build.* in parallel, summed over candidates)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "runs": self.runs, "built": self.built, "wall_s": self.wall_s,
                "candidates_per_s": self.candidates_per_s,
                "seconds": {**dict.fromkeys((*LOOP_STAGES, *BUILD_STAGES, *RUN_STAGES), 0.0), **self.seconds}}


__all__ = ["PipelineProfile"]
