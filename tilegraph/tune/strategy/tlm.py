"""tlm: a language model writes the schedule decisions (TLM, OSDI 2024), the cost model ranks them.

    tg.tune(wl, strategy="tlm", trials=32)           # needs torch: pip install 'tilegraph[tlm]'
    TLMStrategy(model_dir="my-weights/")             # another trained model (tilegraph.tlm.train)

Each round (one propose call):
1. the shipped model (tune/tlm/weights/) writes SAMPLES programs of the workload's sketches,
   decision by decision, illegal values masked by the design space (tune/tlm/sampler.py); each
   sketch's first program is the model's most likely one (greedy decoding). When too few of them
   are new (a peaked model repeats itself) it writes again hotter (TEMPERATURES), and uniform
   samples of the sketches fill what is still missing;
2. the new programs are ranked: by the cost model (the evolutionary search's LightGBM pack-sum
   model, trained on this run's measurements and the database's records of the workload) once it
   is trained, from the first round where it starts from the shipped prior (cost_model/transfer.py);
   before that as written (a draw from the model's distribution keeps its diversity;
   untrained_order="logprob" ranks by the model's log-probability instead, an ablation);
3. the best n are measured.
After each batch the model adapts online: FINETUNE_STEPS gradient steps on this run's best
programs, weighted by speed relative to the best (objective.py), so the next round writes more of
what measured fast here. Sampling and ranking are deterministic under the tuning seed (a torch
generator and a Python rng seeded from it; dropout is off while fine-tuning; LightGBM is run
deterministically). Without a budget from the user it stops after DEFAULT_TRIALS measurements.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.errors import ScheduleError, TilegraphError
from tilegraph.schedule.trace import trace_hash
from tilegraph.tune.cost_model import CostModel, FeatureCache, default_cost_model
from tilegraph.tune.result import RunResult
from tilegraph.tune.space.program import Program, recognise, sample
from tilegraph.tune.space.sketch import space_for
from tilegraph.tune.strategy.base import Candidate, SearchStrategy, TuneContext

log = logging.getLogger(__name__)

SAMPLES = 64              # programs written per round (at least 4 per candidate asked for)
SAMPLING_SHARE = 0.25     # of the time left, at most, spent writing programs per round
MIN_SAMPLING_S = 0.5
FINETUNE_STEPS = 2
FINETUNE_TOP = 16         # this run's best programs the model is fine-tuned on
FINETUNE_LR = 2e-4
FINETUNE_POWER = 2.0
DEFAULT_TRIALS = 64       # without a budget from the user
RECORDS_TO_LEARN = 512
TEMPERATURES = (1.0, 1.5, 2.5)  # multipliers tried in turn while too few new programs come out
UNIFORM_TRIES = 20

_LOADED: dict[str, tuple[Any, dict[str, Any]]] = {}


def _load(model_dir: str | Path | None) -> tuple[Any, dict[str, Any]]:
    """The model of `model_dir` (default: the shipped one), loaded once per process and copied per run."""
    from tilegraph.tune.tlm.weights import WEIGHTS_DIR, load_model

    key = str(model_dir or WEIGHTS_DIR)
    if key not in _LOADED:
        _LOADED[key] = load_model(key)
    net, meta = _LOADED[key]
    return copy.deepcopy(net), meta


class TLMStrategy(SearchStrategy):
    name = "tlm"

    def __init__(self, model_dir: str | Path | None = None, samples: int = SAMPLES, temperature: float = 1.0,
                 finetune_steps: int = FINETUNE_STEPS, untrained_order: str = "sampled",
                 model: CostModel | None = None):
        if untrained_order not in ("sampled", "logprob"):
            raise ValueError(f"untrained_order must be 'sampled' or 'logprob', got {untrained_order!r}")
        if importlib.util.find_spec("torch") is None:
            raise TilegraphError("strategy 'tlm' needs PyTorch: pip install 'tilegraph[tlm]'")
        self.model_dir = model_dir
        self.samples = samples
        self.temperature = temperature
        self.finetune_steps = finetune_steps
        self.untrained_order = untrained_order
        self.net: Any = None
        self.meta: dict[str, Any] = {}
        self._given_model = model is not None
        self.model = model or default_cost_model()  # replaced by the target's in _start when none is given
        self.rounds = 0
        self._sampler: Any = None
        self._sketches: list[str] = []
        self._measured: dict[str, tuple[Program, tuple[str, ...] | None, float]] = {}
        self._pending: dict[str, tuple[Program, tuple[str, ...]]] = {}
        self._proposed: set[str] = set()
        self._feats = FeatureCache(self.model.feature_set)
        self._optimizer: Any = None
        self._count = 0
        self._exhausted = False
        self._rng = random.Random(0)

    # ------------------------------------------------------------------ setup
    def _start(self, ctx: TuneContext) -> None:
        from tilegraph.tune.tlm.language import LANGUAGE_SKETCHES

        if not self._given_model:  # the target's feature set (GPU targets have their own columns)
            self.model = default_cost_model(ctx.target)
            self._feats = FeatureCache(self.model.feature_set)
        sketches = space_for(ctx.workload, ctx.target)
        unspoken = [s for s in sketches if s not in LANGUAGE_SKETCHES]
        if unspoken:
            raise TilegraphError(f"strategy 'tlm' has no words for the sketches {unspoken} of this target (its "
                                 "language is the CPU sketches'); tune it with 'evolutionary', 'gensor' or 'auto'")
        self.net, self.meta = _load(self.model_dir)
        from tilegraph.tune.tlm.sampler import Sampler

        self._rng = random.Random(ctx.seed)
        self._sampler = Sampler(self.net, ctx.workload, ctx.target, seed=ctx.seed)
        self._sketches = sketches
        if ctx.db is not None:
            records = ctx.db.records(ctx.workload.key, ctx.target_fingerprint)
            for r in sorted(records, key=lambda r: -r.created)[:RECORDS_TO_LEARN]:
                prog = recognise(ctx.workload, r.trace_json, ctx.target)
                if prog is not None:
                    self._measured[trace_hash(r.trace_json)] = (
                        prog, self._sentence(ctx, prog), r.latency_s if r.ok and r.latency_s else math.inf)
        self._retrain(ctx)
        log.info("tlm: model of %s parameters (%s), %d recorded programs to learn from",
                 self.meta.get("parameters"), self.meta.get("trained", {}).get("command", "?"), len(self._measured))

    def _sentence(self, ctx: TuneContext, prog: Program) -> tuple[str, ...] | None:
        from tilegraph.tune.tlm.language import render

        return tuple(render(ctx.workload, ctx.target, prog)) if prog.sketch else None

    def _retrain(self, ctx: TuneContext) -> None:
        progs = [(self._feats(p), c) for p, _, c in self._measured.values()]
        model = self.model.fresh()
        model.update([f for f, _ in progs], [c for _, c in progs], ctx.workload.key)
        if model.trained or not self.model.trained:
            self.model = model

    def _finetune(self) -> None:
        """A few weighted steps on this run's best programs: the online adaptation."""
        from tilegraph.tune.tlm.network import torch
        from tilegraph.tune.tlm.objective import batch_tensors, relative_weights, weighted_loss

        done = sorted(((s, c) for _, s, c in self._measured.values() if s is not None and math.isfinite(c)),
                      key=lambda sc: sc[1])[:FINETUNE_TOP]
        if len(done) < 2 or self.finetune_steps <= 0:
            return
        sentences, costs = zip(*done)
        ids, mask = batch_tensors(sentences)
        weights = torch.tensor(relative_weights(costs, FINETUNE_POWER))
        if self._optimizer is None:
            self._optimizer = torch.optim.AdamW(self.net.parameters(), lr=FINETUNE_LR, weight_decay=0.0)
        self.net.eval()  # no dropout: fine-tuning stays deterministic
        with torch.enable_grad():  # whatever grad mode the caller (a torch user, a peer benchmark) left on
            for _ in range(self.finetune_steps):
                self._optimizer.zero_grad()
                loss = weighted_loss(self.net, ids, mask, weights)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
                self._optimizer.step()
        self._sampler.refresh()  # the header caches came from the weights before this step

    # ------------------------------------------------------------------ search
    def _fresh(self, h: str, ctx: TuneContext) -> bool:
        return h not in self._measured and h not in self._proposed and h not in ctx.measured

    def propose(self, ctx: TuneContext, n: int) -> list[Candidate]:
        if self.net is None:
            self._start(ctx)
        if not ctx.has_budget and self._count >= DEFAULT_TRIALS:
            self._exhausted = True
            return []
        now = time.monotonic()
        left = ctx.time_left_s
        deadline = now + max(MIN_SAMPLING_S, SAMPLING_SHARE * left) if left is not None else None
        fresh: dict[str, Any] = {}
        written = 0
        for heat in TEMPERATURES:  # a peaked model repeats itself: write hotter until n are new
            batch = self._sampler.sample_many(self._sketches, max(self.samples, 4 * n), self.temperature * heat,
                                              deadline=deadline)
            written += len(batch)
            for w in batch:
                h = trace_hash(w.program.trace_json)
                if self._fresh(h, ctx):
                    fresh.setdefault(h, w)
            if len(fresh) >= n or (deadline is not None and time.monotonic() > deadline):
                break
        if len(fresh) < n:  # still short: uniform programs of the same sketches fill the batch
            for w in self._uniform(ctx, n - len(fresh)):
                fresh.setdefault(trace_hash(w.program.trace_json), w)
        if not fresh:
            self._exhausted = True
            return []
        fresh_list = list(fresh.values())
        pred = self.model.predict([self._feats(w.program) for w in fresh_list])
        if pred is not None:
            scores = np.asarray(pred, dtype=float)
        elif self.untrained_order == "logprob":  # the model's most likely programs first
            scores = np.array([w.logprob for w in fresh_list])
        else:  # as written (greedy first): a draw from the model's distribution keeps its diversity
            scores = -np.arange(len(fresh_list), dtype=float)
        order = np.argsort(-scores, kind="stable")[:n]
        out = []
        for i in order:
            w = fresh_list[int(i)]
            h = trace_hash(w.program.trace_json)
            self._proposed.add(h)
            self._pending[h] = (w.program, w.sentence)
            meta = {"strategy": self.name, "sketch": w.program.sketch,
                    "origin": "model" if math.isfinite(w.logprob) else "uniform",
                    "ranked_by": "cost model" if pred is not None else f"language model ({self.untrained_order})"}
            if math.isfinite(w.logprob):
                meta["logprob"] = round(w.logprob, 4)
            if pred is not None:
                meta["features"] = self.model.feature_set.version
            out.append(Candidate(w.program.trace_json, None, meta))
        self.rounds += 1
        log.info("tlm: round %d, %d of %d written programs proposed (%.2f s)", self.rounds, len(out), written,
                 time.monotonic() - now)
        return out

    def _uniform(self, ctx: TuneContext, n: int) -> list[Any]:
        """Up to n new programs drawn uniformly from the sketches (what the model would not write)."""
        from tilegraph.tune.tlm.language import render
        from tilegraph.tune.tlm.sampler import Written

        out: list[Any] = []
        for _ in range(UNIFORM_TRIES * max(n, 1)):
            if len(out) >= n:
                break
            try:
                prog = sample(ctx.workload, self._rng.choice(self._sketches), self._rng)
            except ScheduleError:
                continue
            if self._fresh(trace_hash(prog.trace_json), ctx) and all(prog.trace_json != w.program.trace_json for w in out):
                out.append(Written(prog, tuple(render(ctx.workload, ctx.target, prog)), -math.inf))
        return out

    def notify(self, ctx: TuneContext, candidates: Sequence[Candidate], results: Sequence[RunResult]) -> None:
        for cand, res in zip(candidates, results):
            h = trace_hash(cand.trace_json)
            prog, sentence = self._pending.pop(h, (None, None))
            if prog is None:
                prog = recognise(ctx.workload, cand.trace_json, ctx.target)
                sentence = self._sentence(ctx, prog) if prog is not None else None
            if prog is None:
                continue
            self._measured[h] = (prog, sentence, res.median if res.ok and res.median else math.inf)
            self._count += 1
        self._retrain(ctx)
        self._finetune()

    def done(self) -> bool:
        return self._exhausted


__all__ = ["TLMStrategy"]
