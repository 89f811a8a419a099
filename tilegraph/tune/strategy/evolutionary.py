"""evolutionary: Ansor/MetaSchedule's evolutionary search over sketches, guided by a learned cost model.

    tg.tune(wl, strategy="evolutionary", time_budget=60)
    tg.tune(wl, target="opencl", strategy="evolutionary", trials=64)   # the GPU sketches

The sketches are the target's design space (tune/space/sketch.py: space_for): Ansor's CPU rules,
or the GPU tiling sketches of tune/space/gpu_sketch.py; the search never asks what the target is.

Each round (one propose call):
1. the population: the best measured programs (up to 20% of it: this run's, the database's records
   for the workload, and the seeds given, such as Gensor's picks), then random samples of the
   sketches until it is POPULATION strong;
2. GENERATIONS rounds of evolution: every program is scored by the cost model (random scores until
   it is trained); parents are drawn in proportion to their score; with probability MUTATION_PROB a
   child is a mutant of its parent (tile size, unroll, parallel granularity, compute location,
   packing; tune/space/program.py), else a copy; a mutant that does not replay is dropped (the
   legality check); a heap keeps the best-scored programs not yet measured;
3. the batch: the heap's best, except an epsilon-greedy share (at least one per batch) of random
   samples, so the model keeps seeing programs it would not pick.
notify() retrains the model on every measurement (failures count as slow) and logs the Spearman
correlation of its scores with the measured speeds of the batch it ranked.

Defaults are Ansor's scaled to two cores and Python: population 2048 -> 192, generations 4 -> 3,
64 measurements per round -> 24 (the heap left after a batch is re-scored by the retrained model
and serves the next batches of the round), mutation 0.85, measured share 0.2, epsilon 0.05 (with
8 candidates per batch: one). One evolution spends at most SEARCH_SHARE of the time left (and at
most MAX_SEARCH_S), so measuring keeps most of the budget. Without a trial or time budget from the
user it stops after DEFAULT_TRIALS measurements.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence

import numpy as np

from tilegraph.errors import ScheduleError
from tilegraph.schedule.trace import trace_hash
from tilegraph.te.workload import Workload
from tilegraph.tune.cost_model import CostModel, FeatureCache, default_cost_model
from tilegraph.tune.result import RunResult
from tilegraph.tune.space.postproc import check_for_target
from tilegraph.tune.space.program import Program, mutate, recognise, sample
from tilegraph.tune.space.sketch import space_for
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext

log = logging.getLogger(__name__)

POPULATION = 192
GENERATIONS = 3
ROUND_MEASURES = 24  # measurements between two evolutions; between them the ranked heap is re-scored
MUTATION_PROB = 0.85
MEASURED_SHARE = 0.2
EPSILON = 0.05
SEARCH_SHARE = 0.25  # of the time left, at most, per round of evolution
MIN_SEARCH_S = 1.0
MAX_SEARCH_S = 8.0  # an evolution is a few seconds; a long budget buys more rounds, not longer ones
DEFAULT_TRIALS = 64
RECORDS_TO_LEARN = 512  # recorded programs of the workload the model starts from, at most
_MAX_FRUITLESS_SAMPLES = 200


class SharedHistory:
    """Measured programs of many workloads (a model's tasks), so each task's cost model also learns
    from the tasks of the same op: Ansor trains one model on every task of a network."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[str, list[np.ndarray], list[float]]] = {}

    def put(self, workload: Workload, feats: list[np.ndarray], costs: list[float]) -> None:
        self._by_key[workload.key] = (workload.op_name, feats, costs)

    def similar(self, workload: Workload) -> list[tuple[str, list[np.ndarray], list[float]]]:
        return [(key, f, c) for key, (op, f, c) in self._by_key.items()
                if key != workload.key and op == workload.op_name]


class EvolutionarySearch(SearchStrategy):
    name = "evolutionary"

    def __init__(self, seeds: Sequence[str] = (), population: int = POPULATION, generations: int = GENERATIONS,
                 model: CostModel | None = None, shared: SharedHistory | None = None):
        self.seeds = list(seeds)
        self.shared = shared
        self.population = population
        self.generations = generations
        self._given_model = model is not None
        self.model = model or default_cost_model()  # replaced by the target's in _start when none is given
        self._rng: random.Random | None = None
        self._sketches: list[str] = []
        self._measured: dict[str, tuple[Program, float]] = {}  # trace hash -> (program, seconds or inf)
        self._feats = FeatureCache(self.model.feature_set)
        self._proposed: set[str] = set()
        self._pending: dict[str, tuple[Program, float | None]] = {}
        self.history: list[tuple[float, float]] = []  # (score, measured seconds) of ranked candidates
        self.spearman: float | None = None
        self.rounds = 0
        self._exhausted = False
        self._count = 0
        self._queue: list[Program] = []
        self._seed_programs: list[Program] = []  # given traces (measured or not): always in the population
        self._since_evolve = ROUND_MEASURES

    # ------------------------------------------------------------------ setup
    def _start(self, ctx: TuneContext) -> None:
        if not self._given_model:  # the target's feature set (GPU targets have their own columns)
            self.model = default_cost_model(ctx.target)
            self._feats = FeatureCache(self.model.feature_set)
        self._rng = random.Random(ctx.seed)
        self._sketches = space_for(ctx.workload, ctx.target)
        known: list[tuple[str, float]] = []
        if ctx.db is not None:
            records = ctx.db.records(ctx.workload.key, ctx.target_fingerprint)
            records = sorted(records, key=lambda r: -r.created)[:RECORDS_TO_LEARN]
            known = [(r.trace_json, r.latency_s if r.ok and r.latency_s else math.inf) for r in records]
        for trace_json, cost in known:
            self._learn(ctx, trace_json, cost, retrain=False)
        for trace_json in self.seeds:
            prog = recognise(ctx.workload, trace_json, ctx.target)
            if prog is not None:
                self._seed_programs.append(prog)
        self._retrain(ctx)
        log.info("evolutionary: %d sketches %s, %d recorded programs to learn from", len(self._sketches),
                 self._sketches, len(self._measured))

    def _learn(self, ctx: TuneContext, trace_json: str, cost: float, retrain: bool = True) -> None:
        h = trace_hash(trace_json)
        prev = self._measured.get(h)
        prog = prev[0] if prev else recognise(ctx.workload, trace_json, ctx.target)
        if prog is None:
            return
        self._measured[h] = (prog, cost)
        if retrain:
            self._retrain(ctx)

    def _retrain(self, ctx: TuneContext) -> None:
        progs = [(self._feats(p), c) for p, c in self._measured.values()]
        model = self.model.fresh()
        if self.shared is not None:  # similar workloads' measurements (labels normalised per workload)
            for key, feats, costs in self.shared.similar(ctx.workload):
                model.add(feats, costs, key)
            self.shared.put(ctx.workload, [f for f, _ in progs], [c for _, c in progs])
        model.update([f for f, _ in progs], [c for _, c in progs], ctx.workload.key)
        if model.trained or not self.model.trained:  # a model that failed to train keeps the last one
            self.model = model

    # ------------------------------------------------------------------ search
    def _random(self, workload: Workload, n: int) -> list[Program]:
        out: list[Program] = []
        fruitless = 0
        while len(out) < n and fruitless < _MAX_FRUITLESS_SAMPLES and self._sketches:
            try:
                out.append(sample(workload, self._rng.choice(self._sketches), self._rng))  # type: ignore[union-attr]
            except ScheduleError:
                fruitless += 1
        return out

    def _scores(self, progs: Sequence[Program]) -> np.ndarray:
        pred = self.model.predict([self._feats(p) for p in progs])
        if pred is None:
            return np.array([self._rng.random() for _ in progs])  # type: ignore[union-attr]
        return np.asarray(pred, dtype=float)

    def _fresh(self, p: Program, ctx: TuneContext) -> bool:
        """Not measured nor proposed yet, and within the target's limits (a too-wide GPU block is
        marked proposed: refused once, never scored again)."""
        h = trace_hash(p.trace_json)
        if h in self._measured or h in self._proposed or h in ctx.measured:
            return False
        if not check_for_target(p.func, ctx.target)[0]:
            self._proposed.add(h)
            return False
        return True

    def _evolve(self, ctx: TuneContext, deadline: float) -> list[tuple[float, Program]]:
        best_measured = sorted((v for v in self._measured.values() if math.isfinite(v[1])), key=lambda v: v[1])
        seeds = [p for p, _ in best_measured[: int(self.population * MEASURED_SHARE)]]
        seeds += [p for p in self._seed_programs if p not in seeds]
        population = seeds + self._random(ctx.workload, self.population - len(seeds))
        heap: dict[str, tuple[float, Program]] = {}
        generations = self.generations if self.model.trained else 1  # random scores: one round of mutants
        for gen in range(generations + 1):
            if not population:
                break
            scores = self._scores(population)
            for p, s in zip(population, scores):
                if self._fresh(p, ctx):
                    heap[trace_hash(p.trace_json)] = (float(s), p)
            if gen == generations or time.monotonic() > deadline:
                break
            weights = np.clip(scores - scores.min(), 0, None) + 1e-6
            parents = self._rng.choices(population, weights=weights.tolist(), k=self.population)  # type: ignore[union-attr]
            children: list[Program] = []
            for parent in parents:
                if time.monotonic() > deadline:
                    break
                if self._rng.random() < MUTATION_PROB:  # type: ignore[union-attr]
                    child = mutate(ctx.workload, parent, self._rng)  # type: ignore[arg-type]
                    if child is not None:
                        children.append(child)
                else:
                    children.append(parent)
            population = children
        return sorted(heap.values(), key=lambda sp: -sp[0])

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        if self._rng is None:
            self._start(ctx)
        if not ctx.has_budget and self._count >= DEFAULT_TRIALS:
            self._exhausted = True
            return []
        now = time.monotonic()
        self._queue = [p for p in self._queue if self._fresh(p, ctx)]
        n_random = max(1, int(round(EPSILON * n))) if n > 1 else 0
        if self._since_evolve >= ROUND_MEASURES or len(self._queue) < n - n_random:
            left = ctx.time_left_s
            budget = min(MAX_SEARCH_S, max(MIN_SEARCH_S, SEARCH_SHARE * left)) if left is not None else MAX_SEARCH_S
            self._queue = [p for _, p in self._evolve(ctx, now + budget)]
            self._since_evolve = 0
        elif self._queue and self.model.trained:  # the model learnt from the last batch: re-rank the rest
            scores = self._scores(self._queue)
            self._queue = [self._queue[i] for i in np.argsort(-scores, kind="stable")]
        scores = self._scores(self._queue[: n - n_random]) if self._queue else np.zeros(0)
        batch: list[tuple[float | None, Program, str]] = [
            (float(sc), p, "evolved") for sc, p in zip(scores, self._queue[: n - n_random])]
        self._queue = self._queue[n - n_random:]
        for p in self._random(ctx.workload, 4 * n_random):
            if len(batch) >= n:
                break
            if self._fresh(p, ctx) and all(p.trace_json != q.trace_json for _, q, _ in batch):
                batch.append((None, p, "random"))
        if not batch:
            self._exhausted = True
        self.rounds += 1
        out = []
        for score, p, origin in batch:
            h = trace_hash(p.trace_json)
            self._proposed.add(h)
            self._pending[h] = (p, score)
            meta = {"strategy": self.name, "origin": origin, "sketch": p.sketch}
            if score is not None:
                meta["score"] = round(float(score), 6)  # the cost model's pack-sum score (higher = faster)
                meta["features"] = self.model.feature_set.version
            out.append(Candidate(p.trace_json, None, meta))
        log.info("evolutionary: round %d, %d candidates (%.2f s of search, model %s)", self.rounds, len(out),
                 time.monotonic() - now, "trained" if self.model.trained else "warming up")
        return out

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        for cand, res in zip(candidates, results):
            h = trace_hash(cand.trace_json)
            prog, score = self._pending.pop(h, (None, None))
            cost = res.median if res.ok and res.median else math.inf
            if prog is None:
                prog = recognise(ctx.workload, cand.trace_json, ctx.target)
            if prog is None:
                continue
            self._measured[h] = (prog, cost)
            self._count += 1
            self._since_evolve += 1
            if score is not None and math.isfinite(cost) and self.model.trained:
                self.history.append((score, cost))
        if len(self.history) >= 4:
            from scipy.stats import spearmanr

            s, c = zip(*self.history[-64:])
            rho = spearmanr(s, [-x for x in c]).statistic if len(set(s)) > 1 else float("nan")
            self.spearman = None if rho != rho else float(rho)
            log.info("evolutionary: cost model Spearman %.3f over the last %d ranked measurements",
                     self.spearman or 0.0, len(s))
        self._retrain(ctx)

    def learn(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        """Measurements another strategy made (auto's Gensor phase): they seed the population and train the model."""
        if self._rng is None:
            self._start(ctx)
        for cand, res in zip(candidates, results):
            self._learn(ctx, cand.trace_json, res.median if res.ok and res.median else math.inf, retrain=False)
        self._retrain(ctx)

    def done(self) -> bool:
        return self._exhausted


__all__ = ["EvolutionarySearch", "SharedHistory"]
