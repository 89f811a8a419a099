"""Gensor's walk as a mutation: short Markov walks from measured Gensor states (auto's later phase).

    mutator = MarkovMutator(gensor.setup, rng)
    mutator.measured(state, latency_s)                 # every measured candidate that carries a state
    candidates = mutator.propose(k, is_fresh)          # up to k new states near the fastest measured ones

The sketches cannot express Gensor's programs (its register micro-kernels, its packing and K
steps), so the evolutionary search can only re-sample around them, never improve them. This
mutator can: a parent is drawn among the fastest *measured* states (the best most often), then a
walk of one to three steps on Gensor's construction graph (tune/gensor/markov.py: the same
feasible edges and model-weighted transition probabilities as Gensor's own walks, Stop left out)
gives the child, built through the same state -> trace conversion as every Gensor candidate. The
measurements then correct what Gensor's model got wrong: a child that measures faster becomes a
parent in turn. Before:

    measured: gensor#1 4.17 ms {reg [1, 6, 64], l1 [1, 6, 64], ...}, gensor#2 4.18 ms, ...

after propose(2):

    markov: {reg [1, 6, 64], l1 [1, 12, 64], ...} (enlarge l1 of gensor#1), {...} (two steps from gensor#2)
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tilegraph.errors import ScheduleError
from tilegraph.tune.gensor.policy import SearchSetup
from tilegraph.tune.gensor.state import EtirState
from tilegraph.tune.gensor.to_trace import state_to_trace_json
from tilegraph.tune.strategy.base import Candidate

PARENTS = 4            # the fastest measured states a child may come from
MAX_STEPS = 3          # transitions per child, drawn from 1..MAX_STEPS (fewer steps more often)
ATTEMPTS_PER_CHILD = 8  # walks tried per child wanted (a walk may return to a known state)


class MarkovMutator:
    def __init__(self, setup: SearchSetup, rng: random.Random, strategy: str = "auto"):
        self.setup = setup
        self.rng = rng
        self.strategy = strategy
        self._latency: dict[EtirState, float] = {}  # measured states -> seconds (inf: failed)
        self._tried: set[EtirState] = set()          # proposed or measured: never proposed again

    def measured(self, state: EtirState, latency_s: float) -> None:
        """A candidate of this state was measured (latency inf when it failed)."""
        self._latency[state] = min(latency_s, self._latency.get(state, latency_s))
        self._tried.add(state)

    def parents(self) -> list[EtirState]:
        """The fastest measured states, fastest first; not matrix states (their register tiles are
        the matrix unit's, which the construction graph's moves do not model: tune/gensor/matrix_tiles.py)."""
        ok = sorted((t, repr(s), s) for s, t in self._latency.items() if t != float("inf") and not s.matrix)
        return [s for _, _, s in ok[:PARENTS]]

    def child(self, parent: EtirState) -> EtirState:
        """A walk of 1..MAX_STEPS model-weighted transitions from `parent` (never Stop)."""
        graph = self.setup.graph
        state = parent
        steps = min(MAX_STEPS, 1 + int(self.rng.expovariate(1.0)))
        for _ in range(steps):
            edges = graph.edges(state)
            if not edges:
                break
            weights = graph.probabilities(state)[:-1]  # the last entry is Stop
            state = self.rng.choices(edges, weights=weights.tolist())[0].target if weights.sum() > 0 else \
                self.rng.choice(edges).target
        return state

    def propose(self, k: int, is_fresh: Callable[[str], bool]) -> list[Candidate]:
        """Up to k candidates of new states, each a short walk from a parent; `is_fresh(trace_json)`
        says whether a trace is still unmeasured and unproposed."""
        parents = self.parents()
        out: list[Candidate] = []
        if not parents or k < 1:
            return out
        for _ in range(ATTEMPTS_PER_CHILD * k):
            if len(out) >= k:
                break
            rank = min(len(parents) - 1, int(self.rng.expovariate(1.0)))  # the best most often
            parent = parents[rank]
            state = self.child(parent)
            if state in self._tried:
                continue
            self._tried.add(state)
            try:
                trace_json = state_to_trace_json(self.setup.workload, self.setup.space, state)
            except ScheduleError:
                continue
            if not is_fresh(trace_json):
                continue
            meta = {"strategy": self.strategy, "origin": "markov", "state": state.to_dict(),
                    "parent_s": self._latency[parent]}
            out.append(Candidate(trace_json, self.setup.model.predict(state), meta))
        return out


__all__ = ["MarkovMutator"]
