"""gensor: graph-based Markov construction (Gensor, IPDPS 2025, as reconstructed in docs/gensor.md).

    tg.tune(wl, strategy="gensor")

One search per workload: build the construction graph of ETIR states (tune/gensor/), seed walkers
with the minimal state and Roller's picks, run model-weighted random walks (about 1-2 s), descend
greedily from the best states they found (`polish`), rank every visited state by the
micro-performance model (ties: more visits first) and propose the top k
(default 8) as candidates. notify() logs predicted vs measured time and their Spearman correlation.
Deterministic for a given ctx.seed as long as the walk budget, not the time budget, ends the search.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from tilegraph.errors import ScheduleError
from tilegraph.lower.passes.use_matrix_tiles import makes_tile_products
from tilegraph.runtime.backends import backend_for
from tilegraph.target import Target, dot_group
from tilegraph.te.workload import Workload
from tilegraph.tune.gensor.markov import MarkovConfig, WalkResult, polish, random_walks
from tilegraph.tune.gensor.matrix_tiles import matrix_kind, matrix_states
from tilegraph.tune.gensor.policy import SearchSetup, roller_construct
from tilegraph.tune.gensor.state import EtirState
from tilegraph.tune.gensor.to_trace import state_to_schedule
from tilegraph.tune.hardware import HardwareModel, hardware_model
from tilegraph.tune.result import RunResult
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext

log = logging.getLogger(__name__)
ROLLER_SEEDS = 8
# states converted to traces per candidate wanted, at most: many states of a small space (softmax)
# give one trace, and converting all of them (~20 ms each) cost seconds for nothing new
ATTEMPTS_PER_CANDIDATE = 8


def candidates_from_states(setup: SearchSetup, states: Sequence[EtirState], k: int, strategy: str,
                           visits: dict[EtirState, int] | None = None, target: Target | None = None) -> list[Candidate]:
    """The k best states (by model) that build into a schedule, as Candidates; duplicates dropped;
    at most ATTEMPTS_PER_CANDIDATE * k states are converted. A matrix state (its register tile on
    the matrix unit) counts only where lowering for `target` makes its nest one tile product:
    anything else would run its tile-sized register tile on vectors, far slower than the model says."""
    visits = visits or {}
    ranked = sorted(set(states), key=lambda s: (setup.model.predict(s), -visits.get(s, 0), repr(s)))
    out: list[Candidate] = []
    seen: set[str] = set()
    for attempt, s in enumerate(ranked):
        if len(out) >= k or attempt >= ATTEMPTS_PER_CANDIDATE * k:
            break
        try:
            sch = state_to_schedule(setup.workload, setup.space, s)
        except ScheduleError as err:
            log.debug("%s: state %s does not build: %s", strategy, s, err)
            continue
        if s.matrix and not makes_tile_products(sch.func, target):
            log.debug("%s: matrix state %s does not lower to a tile product", strategy, s)
            continue
        trace_json = sch.trace.to_json()
        if trace_json in seen:
            continue
        seen.add(trace_json)
        meta = {"state": s.to_dict(), "strategy": strategy, "visits": visits.get(s, 0)}
        out.append(Candidate(trace_json, setup.model.predict(s), meta))
    return out


class ModelGuidedStrategy(SearchStrategy):
    """Shared part of gensor and roller: search once, propose the ranked list, log model quality."""

    name = "model-guided"

    def __init__(self, top_k: int = 8, config: MarkovConfig | None = None, hw: HardwareModel | None = None,
                 measure_hardware: bool = True):
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.top_k = top_k
        self.config = config
        self.hw = hw
        self.measure_hardware = measure_hardware
        self.setup: SearchSetup | None = None
        self._queue: list[Candidate] | None = None
        self.history: list[tuple[float, float]] = []  # (predicted, measured median) of ok results
        self.spearman: float | None = None

    def _search(self, ctx: TuneContext) -> list[Candidate]:
        raise NotImplementedError

    def _prepare(self, ctx: TuneContext) -> SearchSetup:
        hw = self.hw or hardware_model(ctx.target, measure=self.measure_hardware)
        config = replace(self.config or MarkovConfig(), seed=int(ctx.seed or 0))
        self.setup = SearchSetup.create(ctx.workload, hw, config, workload_dot_group(ctx.workload, ctx.target))
        return self.setup

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        if self._queue is None:
            self._queue = self._search(ctx)
        batch, self._queue = self._queue[:n], self._queue[n:]
        return batch

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        for cand, res in zip(candidates, results):
            if res.ok and res.median is not None and cand.predicted is not None:
                self.history.append((cand.predicted, res.median))
                log.info("%s: predicted %.3g s, measured %.3g s, state %s", self.name, cand.predicted, res.median,
                         cand.meta.get("state"))
        pred, meas = zip(*self.history) if self.history else ((), ())
        if len(self.history) >= 3 and len(set(pred)) > 1 and len(set(meas)) > 1:  # else no rank correlation
            from scipy.stats import spearmanr

            rho = spearmanr(pred, meas).statistic
            self.spearman = None if rho != rho else float(rho)
            log.info("%s: Spearman(predicted, measured) = %s over %d kernels", self.name, self.spearman,
                     len(self.history))

    def done(self) -> bool:
        return self._queue is not None and not self._queue


class GensorStrategy(ModelGuidedStrategy):
    name = "gensor"

    def __init__(self, top_k: int = 8, config: MarkovConfig | None = None, hw: HardwareModel | None = None,
                 measure_hardware: bool = True):
        super().__init__(top_k, config, hw, measure_hardware)
        self.walk: WalkResult | None = None

    def _search(self, ctx: TuneContext) -> list[Candidate]:
        attention = _attention_candidates(ctx)
        if attention is not None:
            return attention
        if backend_for(ctx.target).is_gpu:
            from tilegraph.tune.gensor.gpu_state import gpu_candidates

            return [Candidate(trace, predicted, {"state": state, "strategy": self.name})
                    for trace, predicted, state in gpu_candidates(ctx.workload, ctx.target, self.top_k, int(ctx.seed or 0))]
        setup = self._prepare(ctx)
        seeds = list(dict.fromkeys([setup.minimal, *roller_construct(setup, ROLLER_SEEDS)]))
        self.walk = random_walks(setup.graph, seeds)
        log.info("gensor: %d walks, %d steps, %d states in %.2f s (%s)", self.walk.walks, self.walk.steps,
                 len(self.walk.visits), self.walk.seconds, self.walk.stop_reason)
        states = [*self.walk.visits, *seeds]
        best = sorted(set(states), key=lambda st: (setup.model.predict(st), repr(st)))[: self.top_k]
        states += polish(setup.graph, best)  # one greedy descent from the walk's best states
        kind = matrix_kind(setup.space, ctx.target)
        if kind is not None:  # the matrix unit's register tiles (AMX), ranked by the same model
            states += lowering_matrix_states(setup, matrix_states(setup.space, setup.hw, kind), ctx.target)
        return candidates_from_states(setup, states, self.top_k, self.name, dict(self.walk.visits), ctx.target)


MATRIX_CHECKS = 3  # matrix states lowered to see that they make tile products, best ranked first


def lowering_matrix_states(setup: SearchSetup, states: Sequence[EtirState], target: Target) -> list[EtirState]:
    """`states` when the best of them lowers for `target` to a tile product (states of one space
    share their nest's form), else those of the next ones checked that do (at most MATRIX_CHECKS
    lowered), else none: a matrix state that does not would run its tile-sized register tile on
    vectors, and must not crowd out the vector states it ranks above."""
    for n, s in enumerate(states[:MATRIX_CHECKS]):
        try:
            sch = state_to_schedule(setup.workload, setup.space, s)
        except ScheduleError:
            continue
        if makes_tile_products(sch.func, target):
            return list(states[n:])
    return []


def workload_dot_group(workload: Workload, target: Target) -> int:
    """The K grouping of packed copies for `workload` on `target` (target.dot_group): that of the
    narrowest dtype among its 8- and 16-bit inputs read by a dot-product step, else 0."""
    groups = {dot_group(target, t.dtype.name) for t in workload.inputs}
    return max(groups, default=0)


def _attention_candidates(ctx: TuneContext) -> list[Candidate] | None:
    """A fused attention operator's states are its row-block schedule's choices of rows per block
    (schedule/attention.py), the default first; Gensor's walks do not model its seven stages. None
    for any other workload (or a GPU target)."""
    from tilegraph.schedule.attention import ATTENTION_ROWS, DEFAULT_ROWS, attention_schedule, is_attention

    if backend_for(ctx.target).is_gpu or not is_attention(ctx.workload):
        return None
    out = []
    for rows in dict.fromkeys([DEFAULT_ROWS, *ATTENTION_ROWS]):
        sch = attention_schedule(ctx.workload, ctx.target, rows=rows)
        if sch is not None:
            out.append(Candidate(sch.trace.to_json(), None, {"strategy": "gensor", "attention_rows": rows}))
    return out


__all__ = ["GensorStrategy", "ModelGuidedStrategy", "candidates_from_states"]
