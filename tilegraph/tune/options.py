"""TuneOptions: everything `tg.tune` can be told besides what to tune, where, and which database.

    tg.tune(wl, time_budget=60)                                  # keywords fill a TuneOptions
    opts = TuneOptions(strategy="random", trials=50, seed=3)
    tg.tune(wl, "cpu -cores=2", db="my.db", options=opts)
    tg.tune(wl, options=opts, trials=10)                         # keywords override the object's fields

Extension points are injected here, never through hooks in the code: `builder` (anything with
`build(inputs) -> [BuildResult]`, `kernel(workload, trace_json, meta)` and `close()`, see
tune/builder.py) and `runner` (`run(workload, build, seed, timeout_s=None, best_s=None) -> RunResult`,
`references(workload, inputs)`, `policy`, `close()`, see tune/runner.py). Tests inject hand-written kernels that crash,
hang or compute wrong answers through a builder. `cluster` swaps in the Ray ones (tune/cluster/):
builds as Ray tasks, measurements on runner actors, this process the only database writer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tilegraph.tune.measure import MeasurePolicy

DEFAULT_TRIALS = 200
DEFAULT_BATCH = 8


@dataclass(frozen=True)
class TuneOptions:
    strategy: Any = "auto"                 # a name (auto, gensor, evolutionary, roller, random) or a SearchStrategy
    time_budget: float | None = None       # seconds; with neither budget, DEFAULT_TRIALS trials
    trials: int | None = None
    seed: int = 0
    progress: bool = True                  # a progress bar on a terminal
    num_threads: int | None = None         # threads each candidate runs with (also policy.num_threads)
    batch_size: int = DEFAULT_BATCH        # candidates built in parallel per round
    policy: MeasurePolicy = field(default_factory=MeasurePolicy)
    reference: Any = None                  # (workload, inputs) -> outputs; default testing.reference_outputs
    build_workers: int | None = None
    build_timeout_s: float = 120.0
    builder: Any = None                    # injected Builder-like object (see the module docstring)
    runner: Any = None                     # injected Runner-like object
    cluster: str | None = None             # "local", "auto" or a Ray address: build and measure there (tune/cluster)

    def __post_init__(self) -> None:
        if self.time_budget is not None and not (isinstance(self.time_budget, (int, float)) and self.time_budget > 0
                                                 and math.isfinite(self.time_budget)):
            raise ValueError(f"time_budget must be a positive finite number of seconds, got {self.time_budget!r}")
        if self.trials is not None and (not isinstance(self.trials, int) or isinstance(self.trials, bool)
                                        or self.trials < 0):
            raise ValueError(f"trials must be a non-negative integer, got {self.trials!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size!r}")
        if self.build_timeout_s <= 0:
            raise ValueError(f"build_timeout_s must be positive, got {self.build_timeout_s!r}")
        if self.num_threads is not None:
            if self.policy.num_threads is None:
                object.__setattr__(self, "policy", replace(self.policy, num_threads=self.num_threads))
            elif self.policy.num_threads != self.num_threads:
                raise ValueError(f"num_threads={self.num_threads} conflicts with policy.num_threads="
                                 f"{self.policy.num_threads}")

    @property
    def trial_limit(self) -> int | None:
        """The trial budget in force: the one given, or DEFAULT_TRIALS when no budget was given."""
        if self.trials is None and self.time_budget is None:
            return DEFAULT_TRIALS
        return self.trials

    def updated(self, **changes: Any) -> TuneOptions:
        """These options with some fields changed; an unknown name is a TypeError listing the known."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(f"tune() got unknown option(s) {unknown}; options are: {', '.join(sorted(known))}")
        if "num_threads" in changes and "policy" not in changes and self.policy.num_threads == self.num_threads:
            changes["policy"] = replace(self.policy, num_threads=None)  # the policy's threads came from num_threads
        return replace(self, **changes) if changes else self


__all__ = ["DEFAULT_BATCH", "DEFAULT_TRIALS", "TuneOptions"]
