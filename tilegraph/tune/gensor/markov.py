"""Markov analysis of the construction graph: model-weighted random walks and their exact oracle.

Transition probabilities out of a state s with feasible successors s_1..s_n (plus Stop):

    g_i     = ln(T̂(s) / T̂(s_i)) + λ · reuse_i / max_j reuse_j     (reuse term on enlarge edges only)
    P(s_i)  = exp(β g_i) / (1 + Σ_j exp(β g_j))                      Stop has score 0
    P(Stop) = 1 / (1 + Σ_j exp(β g_j))

A walk starts at a seed (the minimal state and Roller's picks, in turn), counts a visit at every
state it occupies, ends on Stop or, at every step, with the restart probability ρ (0.05), and the
next walk starts at the next seed. That process is exactly the Markov chain

    Q(s, ·) = ρ · seed + (1 - ρ) · [Σ_i P(s_i) δ_{s_i} + P(Stop) · seed]

so its long-run visit frequencies approach Q's stationary distribution, which `stationary` computes
by power iteration on the BFS-reachable subgraph (small spaces; the test oracle for the sampler).
Global stop for the sampler: time budget, walk budget, or no new state in `patience` walks.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tilegraph.tune.gensor.perf_model import PerfModel
from tilegraph.tune.gensor.state import EtirState, IterSpace
from tilegraph.tune.gensor.transitions import Edge, neighbours
from tilegraph.tune.hardware import HardwareModel


@dataclass(frozen=True)
class MarkovConfig:
    beta: float = 4.0  # inverse temperature: higher = greedier walks
    reuse_lambda: float = 0.5  # weight of Roller's data-reuse prior on enlarge edges
    restart: float = 0.05
    max_depth: int | None = 64
    max_walks: int = 400
    time_budget_s: float = 1.5
    patience: int = 24  # stop after this many walks without a new state
    seed: int = 0

    def __post_init__(self) -> None:
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if not 0 <= self.restart < 1:
            raise ValueError(f"restart must be in [0, 1), got {self.restart}")
        if self.max_walks < 1:
            raise ValueError(f"max_walks must be >= 1, got {self.max_walks}")


class ConstructionGraph:
    """Lazily expanded graph of feasible states with memoised edges and transition probabilities."""

    def __init__(self, space: IterSpace, hw: HardwareModel, model: PerfModel, minimal: EtirState,
                 config: MarkovConfig, packable: tuple[str, ...] = ()):
        self.space, self.hw, self.model, self.minimal = space, hw, model, minimal
        self.config = config
        self.packable = packable
        self._edges: dict[EtirState, list[Edge]] = {}
        self._probs: dict[EtirState, np.ndarray] = {}

    def edges(self, s: EtirState) -> list[Edge]:
        got = self._edges.get(s)
        if got is None:
            got = self._edges[s] = neighbours(self.space, self.hw, s, self.minimal, self.packable)
        return got

    def probabilities(self, s: EtirState) -> np.ndarray:
        """Probabilities of the edges of `s`, in order, then of Stop (last entry)."""
        got = self._probs.get(s)
        if got is not None:
            return got
        edges = self.edges(s)
        t_here = self.model.predict(s)
        scores = np.array([math.log(t_here / self.model.predict(e.target)) for e in edges] + [0.0])
        reuse = np.zeros(len(scores))
        for i, e in enumerate(edges):
            if e.kind == "enlarge":
                reuse[i] = self.model.reuse_score(s, e.target, e.level)
        if reuse.max() > 0:
            scores += self.config.reuse_lambda * reuse / reuse.max()
        logits = self.config.beta * scores
        logits -= logits.max()
        p = np.exp(logits)
        got = self._probs[s] = p / p.sum()
        return got


@dataclass
class WalkResult:
    visits: Counter = field(default_factory=Counter)
    walks: int = 0
    steps: int = 0
    seconds: float = 0.0
    stop_reason: str = ""
    log: list[tuple[int, str]] = field(default_factory=list)  # (walk index, edge label) of every move

    def frequencies(self) -> dict[EtirState, float]:
        total = sum(self.visits.values())
        return {s: n / total for s, n in self.visits.items()}


def random_walks(graph: ConstructionGraph, seeds: Sequence[EtirState], config: MarkovConfig | None = None,
                 max_walks: int | None = None, ignore_time: bool = False) -> WalkResult:
    """Run walkers from the seeds in turn; deterministic for a given config.seed (without time limits)."""
    cfg = config or graph.config
    if not seeds:
        raise ValueError("random_walks needs at least one seed state")
    rng = random.Random(cfg.seed)
    result = WalkResult()
    start = time.perf_counter()
    limit = max_walks if max_walks is not None else cfg.max_walks
    since_new = 0
    while True:
        if result.walks >= limit:
            result.stop_reason = "walk budget"
            break
        if not ignore_time and time.perf_counter() - start > cfg.time_budget_s:
            result.stop_reason = "time budget"
            break
        if max_walks is None and since_new >= cfg.patience and result.walks >= 2 * len(seeds):
            result.stop_reason = f"no new state in {cfg.patience} walks"
            break
        s = seeds[result.walks % len(seeds)]
        before = len(result.visits)
        depth = 0
        while True:
            result.visits[s] += 1
            if rng.random() < cfg.restart or (cfg.max_depth is not None and depth >= cfg.max_depth):
                break
            p = graph.probabilities(s)
            i = _sample(rng, p)
            if i == len(p) - 1:
                break
            edge = graph.edges(s)[i]
            result.log.append((result.walks, edge.label))
            s = edge.target
            depth += 1
            result.steps += 1
        since_new = 0 if len(result.visits) > before else since_new + 1
        result.walks += 1
    result.seconds = time.perf_counter() - start
    return result


def polish(graph: ConstructionGraph, starts: Sequence[EtirState], max_steps: int = 16) -> list[EtirState]:
    """Greedy descent from each start: move to the neighbour the model predicts fastest while it
    improves. The walk samples moves in proportion to their gain and can stop one move short of a
    better state (C1D-4: L2 blocks of 18 of 32 rows, which re-copy the packed weights; the whole 36
    was predicted faster, never visited, and measures 1.3x faster). Returns every state visited."""
    seen: list[EtirState] = []
    for state in starts:
        for _ in range(max_steps):
            seen.append(state)
            best = min((e.target for e in graph.edges(state)), key=graph.model.predict, default=None)
            if best is None or graph.model.predict(best) >= graph.model.predict(state):
                break
            state = best
    return list(dict.fromkeys(seen))


def _sample(rng: random.Random, p: np.ndarray) -> int:
    u = rng.random()
    acc = 0.0
    for i, x in enumerate(p):
        acc += x
        if u < acc:
            return i
    return len(p) - 1


def reachable(graph: ConstructionGraph, seeds: Sequence[EtirState], cap: int = 20_000) -> list[EtirState]:
    """Breadth-first enumeration of the feasible states reachable from the seeds."""
    order: list[EtirState] = []
    seen: set[EtirState] = set()
    frontier = [s for s in seeds if not (s in seen or seen.add(s))]  # type: ignore[func-returns-value]
    while frontier:
        order.extend(frontier)
        if len(order) > cap:
            raise ValueError(f"the reachable space has more than {cap} states; raise cap or use random_walks")
        nxt = []
        for s in frontier:
            for e in graph.edges(s):
                if e.target not in seen:
                    seen.add(e.target)
                    nxt.append(e.target)
        frontier = nxt
    return order


def stationary(graph: ConstructionGraph, seeds: Sequence[EtirState], config: MarkovConfig | None = None,
               cap: int = 20_000, tol: float = 1e-13) -> dict[EtirState, float]:
    """Exact stationary distribution of the walk process (see the module docstring) by power iteration."""
    cfg = config or graph.config
    states = reachable(graph, seeds, cap)
    index = {s: i for i, s in enumerate(states)}
    n = len(states)
    seed_dist = np.zeros(n)
    for s in seeds:
        seed_dist[index[s]] += 1.0 / len(seeds)
    rows, cols, vals, stop = [], [], [], np.zeros(n)
    for s in states:
        i = index[s]
        p = graph.probabilities(s)
        for e, pe in zip(graph.edges(s), p[:-1]):
            rows.append(i)
            cols.append(index[e.target])
            vals.append((1 - cfg.restart) * pe)
        stop[i] = cfg.restart + (1 - cfg.restart) * p[-1]
    rows_a, cols_a, vals_a = np.array(rows, dtype=int), np.array(cols, dtype=int), np.array(vals)
    pi = seed_dist.copy()
    for _ in range(100_000):
        nxt = np.zeros(n)
        np.add.at(nxt, cols_a, pi[rows_a] * vals_a)
        nxt += (pi @ stop) * seed_dist
        if np.abs(nxt - pi).sum() < tol:
            pi = nxt
            break
        pi = nxt
    return {s: float(pi[index[s]]) for s in states}


def total_variation(p: dict[EtirState, float], q: dict[EtirState, float]) -> float:
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


__all__ = ["ConstructionGraph", "MarkovConfig", "WalkResult", "random_walks", "reachable", "stationary",
           "total_variation"]
