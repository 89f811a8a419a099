"""TaskScheduler: one tuning budget spent across a model's tasks (Ansor's task scheduler, §1.5 of
the research notes), measured in wall time.

    scheduler = TaskScheduler(tasks, session, time_budget=180)      # and/or trials=400
    scheduler.run(progress=callback)     # callback(scheduler, message) after every slice
    scheduler.states                     # per task: before, best, measured, slices, seconds

First round: every task, largest estimated share of the model first (weight x FLOPs until
measured), gets one slice: its default schedule (the "before" latency) and the first
FIRST_TRIALS candidates of a fast Gensor search. Then, slice by slice, the task with the largest
expected reduction of model latency per second of tuning gets SLICE_TRIALS more measurements
from its strategy (`slice_strategy`; by default "auto": Gensor's ranked queue, then evolutionary
search with a learned cost model, one strategy object per task across its slices). The expected reduction is Ansor's gradient:

    w_i * [ alpha * (g_i(t-W) - g_i(t)) / W  +  (1 - alpha) * max(g_i / t_i, g_i - beta * C_i / V*) ]

w_i occurrences, g_i best latency, t_i slices so far, W the backward window, C_i FLOPs and V* the
best FLOP/s reached by a similar task (same op); divided here by the task's measured seconds per
slice, because the budget is time and slices of a large convolution cost more than a small one's.
A task dies when its strategy has nothing new to measure or EARLY_STOP slices in a row improved
it by less than MIN_GAIN; the run stops when the budget is spent or every task is dead.

Budgets: `time_budget` is this run's wall time (a slice starts only if its estimated cost
fits; inside a slice measurement stops at the deadline); `trials` counts every measurement of
the model's tasks in the database, earlier runs' included. Resuming: a task with records skips
its first round and starts from its recorded best; traces already recorded are never measured
again (tune/session.py), so a rerun after a kill continues where the first run stopped.

Settling: with a time budget, the search gets its first 1 - SETTLE_SHARE (90%); the rest, and
whatever the search left, re-times each task's few best records against each other in
alternating rounds (tune/retime.py), the tasks that weigh most in the model first, while a round
fits: on a machine whose speed moves, the fastest of a task's records is partly luck.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tilegraph.errors import ScheduleError
from tilegraph.graph.tuning.tasks import Task
from tilegraph.schedule import Trace
from tilegraph.tune.retime import SETTLE_SHARE, round_fits
from tilegraph.tune.session import TuneSession
from tilegraph.tune.strategy.auto import AutoStrategy
from tilegraph.tune.strategy.base import Candidate, SearchStrategy
from tilegraph.tune.strategy.evolutionary import EvolutionarySearch, SharedHistory
from tilegraph.tune.strategy.gensor import GensorStrategy
from tilegraph.tune.strategy.seeded import SeededStrategy, default_candidate

log = logging.getLogger("tilegraph.tune.scheduler")

FIRST_TRIALS = 4        # Gensor candidates in a task's first slice (plus its default schedule)
SLICE_TRIALS = 4        # measurements per later slice
GENSOR_TOP_K = 24       # how deep a Gensor generation's ranked queue goes
GENERATIONS = 3         # Gensor searches (seeds) per task before its space counts as exhausted
ALPHA = 0.2             # Ansor's weight of the backward difference
BETA = 2.0              # Ansor's optimism about similar tasks' FLOP/s
WINDOW = 3              # slices in the backward difference
EARLY_STOP = 3          # slices in a row ...
MIN_GAIN = 0.01         # ... each improving the task by less than this fraction: the task dies
FIRST_SLICE_GUESS_S = 5.0  # the cost of a first slice before any was measured
FIRST_SLICE_FLOOR = 0.25   # a smaller task's first slice costs at least this share of a larger one's
MEASURE_GUESS_S = 0.5      # the cost of one measurement in a later slice before any was measured
NEIGHBOUR_SEEDS = 1        # a bucket's first slice measures its nearest measured neighbour's best, besides its own
                           # candidates (every neighbour's, on BERT: the default and 4 seeds filled the slice)


@dataclass
class TaskState:
    task: Task
    before_s: float | None = None          # the default schedule's latency
    best_s: float | None = None
    history: list[float] = field(default_factory=list)  # best after each slice (history[0]: before)
    measured: int = 0                      # this task's records, earlier runs' included
    measured_now: int = 0                  # measurements taken by this run
    slices: int = 0                        # slices given, earlier runs' counted from records
    seconds: float = 0.0                   # this run's tuning time
    slice_seconds: list[float] = field(default_factory=list)
    dead: str | None = None                # why the task gets no more slices
    strategy: SearchStrategy | None = None
    generation: int = 0
    stale: int = 0                         # slices in a row without MIN_GAIN
    empty: int = 0                         # slices in a row that found nothing new to measure
    settled: bool = False                  # its best records were re-timed against each other (_settle)

    @property
    def cost_s(self) -> float | None:
        """Seconds a later slice of this task is expected to take (its later slices' mean)."""
        later = self.slice_seconds[1:]
        return sum(later) / len(later) if later else None


class AutoSlices:
    """The default slice strategy, "auto": Gensor's ranked candidates, GENSOR_TOP_K deep, then
    evolutionary search seeded with what they measured (one strategy object per task, kept across
    its slices, so its population and cost model are too). The tasks' cost models share their
    measurements by op (SharedHistory): a convolution task learns from the model's other
    convolutions. A later generation starts again with another seed."""

    def __init__(self) -> None:
        self.shared = SharedHistory()

    def __call__(self, task: Task, generation: int) -> SearchStrategy:
        return AutoStrategy(gensor=GensorStrategy(top_k=GENSOR_TOP_K), evolution=EvolutionarySearch(shared=self.shared))


def default_slice_strategy(task: Task, generation: int) -> SearchStrategy:
    """Gensor's ranked candidates then evolutionary search, without measurements shared between tasks
    (TaskScheduler's default is AutoSlices(), which shares them)."""
    return AutoStrategy(gensor=GensorStrategy(top_k=GENSOR_TOP_K))


class TaskScheduler:
    def __init__(self, tasks: Sequence[Task], session: TuneSession, time_budget: float | None = None,
                 trials: int | None = None,
                 slice_strategy: Callable[[Task, int], SearchStrategy] | None = None):
        if time_budget is None and trials is None:
            raise ValueError("the task scheduler needs a time budget, a trial budget or both")
        self.session = session
        self.time_budget = time_budget
        self.trials = trials
        self.slice_strategy = slice_strategy or AutoSlices()
        self.states = [self._restore(t) for t in tasks]
        self.start = time.monotonic()
        self.stop_reason = ""
        self.settling = False

    # ------------------------------------------------------------------ state
    def _restore(self, task: Task) -> TaskState:
        """A task's state from the database (resume): its records, best and default latency."""
        records = self.session.records(task.workload)
        st = TaskState(task, measured=len(records))
        ok = [r for r in records if r.ok and r.latency_s is not None]
        default = [r.latency_s for r in ok if r.meta.get("strategy") == "default"]
        st.before_s = default[0] if default else None
        if ok:
            st.best_s = min(r.latency_s for r in ok)  # type: ignore[type-var]
            st.history = [st.before_s or st.best_s, st.best_s]  # type: ignore[list-item]
        if records:
            st.slices = 1 + max(0, math.ceil((len(records) - 1 - FIRST_TRIALS) / SLICE_TRIALS))
        return st

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.start

    @property
    def time_left_s(self) -> float | None:
        """Of the search's share of the time budget (the rest settles the best: _settle)."""
        if self.time_budget is None:
            return None
        share = 1.0 if self.settling else 1.0 - SETTLE_SHARE
        return self.time_budget * share - self.elapsed_s

    @property
    def total_measured(self) -> int:
        return sum(st.measured for st in self.states)

    @property
    def estimate_s(self) -> float:
        """Sum over measured tasks of occurrences x best latency: the tasks' share of the model."""
        return sum(st.task.weight * st.best_s for st in self.states if st.best_s is not None)

    @property
    def untuned_s(self) -> float:
        return sum(st.task.weight * st.before_s for st in self.states if st.before_s is not None)

    def _trials_left(self) -> int | None:
        return None if self.trials is None else self.trials - self.total_measured

    # ------------------------------------------------------------------ the loop
    def run(self, progress: Callable[[TaskScheduler, str], None] | None = None) -> TaskScheduler:
        self.start = time.monotonic()
        report = progress or (lambda s, m: None)
        first = sorted((st for st in self.states if st.slices == 0),
                       key=lambda st: -st.task.weight * st.task.flops)
        skipped = 0
        for st in first:
            if not self._fits(st):
                skipped += 1
                continue
            self._slice(st, first=True)
            report(self, f"first round: {st.task.name}")
        if skipped:
            why = self.stop_reason or "time budget spent"
            self.stop_reason = f"{why} ({skipped} of {len(self.states)} tasks not tuned)"
        while True:
            st = self._pick()
            if st is None:
                break
            self._slice(st, first=False)
            report(self, f"{st.task.name}: slice {st.slices}")
        if not self.stop_reason:
            self.stop_reason = "every task converged or exhausted"
        self._settle(report)
        report(self, f"done: {self.stop_reason}")
        return self

    def _settle(self, report: Callable[[TaskScheduler, str], None]) -> None:
        """With a time budget, its last SETTLE_SHARE (and whatever the search left) re-times each
        task's few best records against each other (tune/retime.py), the tasks that weigh most in
        the model first, as long as a round fits."""
        if self.time_budget is None:
            return
        self.settling = True
        end = self.start + self.time_budget
        for st in sorted(self.states, key=lambda s: -s.task.weight * (s.best_s or 0.0)):
            if st.best_s is None or st.measured < 2:
                continue
            if not round_fits(self.session.runner, end):
                break
            if self.session.retime_best(st.task.workload, deadline=end):
                best = self.session.best(st.task.workload)
                st.best_s = None if best is None else best.latency_s
                st.settled = True
                report(self, f"settled: {st.task.name}")

    def _fits(self, st: TaskState) -> bool:
        left = self._trials_left()
        if left is not None and left <= 0:
            self.stop_reason = "trial budget spent"
            return False
        if self.time_left_s is None:
            return True
        if self.time_left_s <= 0:
            self.stop_reason = "time budget spent"
            return False
        if not any(s.slice_seconds for s in self.states):
            return True  # nothing measured yet to estimate from: try (the slice stops at the deadline)
        return self._cost(st) <= self.time_left_s

    def _cost(self, st: TaskState) -> float:
        """Expected seconds of the task's next slice: its own later slices' mean; else, for a first
        slice, _first_cost; else, for a later slice, other tasks' later slices (no search in them,
        unlike a first slice) or a guess, but no less than its own first slice's share per measurement."""
        if st.cost_s is not None:
            return st.cost_s
        if st.slices == 0:
            return self._first_cost(st)
        later = [c for s in self.states for c in s.slice_seconds[1:]]
        guess = sum(later) / len(later) if later else MEASURE_GUESS_S * SLICE_TRIALS
        # its own first slice, per measurement, bounds it from below: a large task's measurements
        # cost more than the small tasks' that made the others' mean
        own = st.slice_seconds[0] * SLICE_TRIALS / (FIRST_TRIALS + 1) if st.slice_seconds else 0.0
        return max(guess, own)

    def _first_cost(self, st: TaskState) -> float:
        """Expected seconds of an unmeasured task's first slice: the cheapest first slice seen, each
        scaled down by the task's FLOPs against the measured task's (checking and timing a candidate
        grow with the work; searching and building do not, hence the floor FIRST_SLICE_FLOOR).
        Optimistic on purpose: the first round is the one slice every task should get, and a slice
        that overruns stops measuring at the deadline. (A mean of the first slices let one large task,
        GPT-2's 768x50304 LM head on a GPU at 22 s, price every other task out of the first round.)"""
        seen = [(s.slice_seconds[0], s.task.flops) for s in self.states if s.slice_seconds]
        if not seen:
            return FIRST_SLICE_GUESS_S
        return min(seconds * min(1.0, max(FIRST_SLICE_FLOOR, st.task.flops / max(flops, 1)))
                   for seconds, flops in seen)

    def _pick(self) -> TaskState | None:
        """The alive task with the largest expected gain per second that fits the budget left."""
        scored = [(self.gain_per_second(st), st) for st in self.states if st.dead is None and st.slices > 0]
        scored = [(g, st) for g, st in scored if g > 0]
        if not scored:
            return None
        scored.sort(key=lambda gs: -gs[0])
        for _, st in scored:
            if self._fits(st):
                return st
            if self.stop_reason:
                return None
        self.stop_reason = "time budget spent (no slice fits the time left)"
        return None

    def gain_per_second(self, st: TaskState) -> float:
        """Ansor's expected reduction of model latency from one more slice, per second of slice."""
        g = st.best_s
        if g is None:  # nothing ran correctly yet: worth one more try only while nothing else is
            return 1e-12
        hist = st.history
        window = min(WINDOW, len(hist) - 1)
        backward = (hist[-1 - window] - hist[-1]) / window if window > 0 else 0.0
        speeds = [s.task.flops / s.best_s for s in self.states
                  if s.best_s and s.task.op == st.task.op and s.task.flops > 0]
        forward = g / max(1, st.slices)
        if speeds and st.task.flops > 0:
            forward = max(forward, g - BETA * st.task.flops / max(speeds))
        gain = st.task.weight * (ALPHA * backward + (1 - ALPHA) * forward)
        return gain / max(self._cost(st), 1e-3)

    def _neighbour_seeds(self, task: Task) -> list[Candidate]:
        """A bucket's task measures first the best schedule of its nearest neighbouring bucket that
        has records (the same computation over other loop extents: graph/buckets.py); one that does
        not fit these loops is recorded as a failed build, as any candidate."""
        seeds: list[Candidate] = []
        for other in task.neighbours:
            if len(seeds) == NEIGHBOUR_SEEDS:
                break
            best = self.session.best(other)
            if best is None or not best.ok:
                continue
            try:
                trace = Trace.from_json(best.trace_json)
            except ScheduleError:
                continue
            seeds.append(Candidate(replace(trace, workload_key=task.workload.key).to_json(), None,
                                   {"strategy": "neighbour bucket"}))
        return seeds

    def _slice(self, st: TaskState, first: bool) -> None:
        wl = st.task.workload
        left = self._trials_left()
        trials = (FIRST_TRIALS + 1) if first else SLICE_TRIALS
        if left is not None:
            trials = min(trials, left)
        if st.strategy is None:
            st.strategy = self.slice_strategy(st.task, st.generation)
            if first:
                neighbours = self._neighbour_seeds(st.task)
                trials += len(neighbours)  # the seeds take no place from the strategy's own first candidates
                if left is not None:
                    trials = min(trials, left)
                st.strategy = SeededStrategy([default_candidate(wl, self.session.target), *neighbours], st.strategy)
        deadline = None if self.time_budget is None else self.start + self.time_budget * (1.0 - SETTLE_SHARE)
        got = self.session.tune_slice(wl, st.strategy, trials, deadline, seed=st.generation)
        log.info("task %s: slice %d, %d measured, best %s, %.1f s", st.task.name, st.slices + 1, got.measured,
                 got.best_s, got.seconds)
        st.slices += 1
        st.seconds += got.seconds
        st.slice_seconds.append(got.seconds)
        st.measured += got.measured
        st.measured_now += got.measured
        if first and st.before_s is None:
            default = [r.latency_s for r in self.session.records(wl) if r.ok and r.meta.get("strategy") == "default"]
            st.before_s = default[0] if default else None
        previous = st.best_s
        st.best_s = got.best_s
        if not st.history and got.best_s is not None:
            st.history = [st.before_s or got.best_s]
        if got.best_s is not None:
            st.history.append(got.best_s)
        improved = previous is not None and got.best_s is not None and got.best_s < previous * (1 - MIN_GAIN)
        st.empty = 0 if got.measured else st.empty + 1
        if got.measured == 0:  # nothing new to measure: the next generation searches again, or the task dies
            if st.strategy.done() or st.empty >= EARLY_STOP:
                st.generation += 1
                st.strategy = None
                if st.generation >= GENERATIONS:
                    st.dead = "search space exhausted"
            return
        st.stale = 0 if (improved or first) else st.stale + 1
        if st.stale >= EARLY_STOP:
            st.dead = f"converged ({EARLY_STOP} slices under {MIN_GAIN:.0%} gain)"


__all__ = ["AutoSlices", "TaskScheduler", "TaskState", "default_slice_strategy", "FIRST_TRIALS", "SLICE_TRIALS"]
